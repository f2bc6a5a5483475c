"""The runtime form of a diff fix: the functions and methods the diff changes,
compiled from the ported source of the installed module (the port engine on
the module's own file, so the installed release's text, not the diff's), in
that module's namespace, and swapped in; a class attribute whose value the
diff changes (`name = value` in a class body) is set to the new value,
evaluated as its class body would. All or nothing: each is either applied
whole or refused with one line saying why, and nothing is swapped then. Refused:
a diff that changes module statements, decorators, signatures, adds or
removes a function or attribute, or a file that is not a Python module
changed in place; one whose module is not importable here; a function another
enabled hot-fix has swapped (one function, one hot-fix); a function that made
a closure still alive (`handler = make_handler()` at import: it would keep the
old code); a method whose wrapper (a metaclass, class decorator,
__init_subclass__ or decorator) does not say what it wraps.

The function holding a def's body (the def, what its wrapper names as
__wrapped__, or the function of that name a wrapper closes over) keeps its
object and gets the new code, so a registry holding it, a `from m import f`
made before, or a wrapper its class made runs the fix too (what a decorator
cached of earlier calls, e.g. jax.jit's traces, is kept); a decorated def
whose wrapper is reproduced by compiling it again is rebound by name, and
callers holding the old wrapper keep it, as with any monkeypatch.

    enable(fix) / disable(fix)   a diff fix's HotFix (engines/imported.runtime_form makes it)
    from_patch(path)   a patch file's diff fix with its hot-fix (FIXMONO_HOTFIXES=path.patch), known by its path
    enabled_patches() / disable_id(id)   the patch files enabled now; one disabled by its id
"""
from __future__ import annotations

import ast
import dataclasses
import functools
import gc
import importlib
import inspect
import os
import types
from typing import NamedTuple
from pathlib import Path

from fixmono.engines.port import DiffTransform, diff_fixes
from fixmono.model.errors import NotApplicable, TargetSyntaxError, TransformFailed, UserError
from fixmono.model.fix import Fix, HotFix
from fixmono.model.patchfile import read_patch
from fixmono.model.projects import PROJECTS, installed_module

FUNCTIONS = (ast.FunctionDef, ast.AsyncFunctionDef)


class Refused(Exception):
    """The diff cannot be a hot-fix; the message says why (one line)."""


def functions(tree: ast.Module) -> dict[str, ast.AST]:
    """Every def at module level or in a class (nested classes too), by qualified name."""
    found = {}

    def visit(body: list, prefix: str) -> None:
        for node in body:
            if isinstance(node, FUNCTIONS):
                found[prefix + node.name] = node
            elif isinstance(node, ast.ClassDef):
                visit(node.body, f"{prefix}{node.name}.")

    visit(tree.body, "")
    return found


def class_attributes(tree: ast.Module) -> dict[str, ast.Assign]:
    """Every `name = value` directly in a class body (nested classes too), by qualified name."""
    found = {}

    def visit(body: list, prefix: str) -> None:
        for node in body:
            if isinstance(node, ast.ClassDef):
                visit(node.body, f"{prefix}{node.name}.")
            elif prefix and isinstance(node, ast.Assign) and len(node.targets) == 1 \
                    and isinstance(node.targets[0], ast.Name):
                found[prefix + node.targets[0].id] = node

    visit(tree.body, "")
    return found


def skeleton(tree: ast.Module) -> str:
    """The module with every function body and class attribute value emptied: what must not change."""
    tree = ast.parse(ast.unparse(tree))
    for node in functions(tree).values():
        node.body = [ast.Pass()]
    for node in class_attributes(tree).values():
        node.value = ast.Constant(None)
    return ast.dump(tree)


def changed_functions(old: str, new: str) -> list[str]:
    """The qualified names of the functions whose bodies differ and of the class
    attributes whose values differ; Refused when anything else differs."""
    before, after = ast.parse(old), ast.parse(new)
    old_funcs, new_funcs = functions(before), functions(after)
    if set(old_funcs) != set(new_funcs):
        moved = sorted(set(old_funcs) ^ set(new_funcs))
        raise Refused(f"it adds or removes functions ({', '.join(moved)}); only changed bodies can be swapped in")
    changed = [q for q in old_funcs if ast.dump(old_funcs[q]) != ast.dump(new_funcs[q])]
    for name in changed:
        if [ast.dump(d) for d in old_funcs[name].decorator_list] != \
                [ast.dump(d) for d in new_funcs[name].decorator_list] or \
                ast.dump(old_funcs[name].args) != ast.dump(new_funcs[name].args):
            raise Refused(f"it changes {name}'s decorators or signature; only bodies can be swapped in")
    if skeleton(before) != skeleton(after):
        raise Refused("it changes module statements or the shape of a class, outside function bodies and class "
                      "attribute values")
    old_attrs, new_attrs = class_attributes(before), class_attributes(after)
    return changed + [q for q in old_attrs if ast.dump(old_attrs[q].value) != ast.dump(new_attrs[q].value)]


def attribute_value(new_source: str, qualname: str, module, owner):
    """A changed class attribute's new value, evaluated as its class body would:
    the class's own names first, then the module's. Refused where another
    statement of that class body reads the name (its value would not follow)."""
    tree = ast.parse(new_source)
    node = class_attributes(tree)[qualname]
    name = qualname.rpartition(".")[2]
    body = next(n for n in ast.walk(tree) if isinstance(n, ast.ClassDef) and node in n.body).body
    for other in body:
        if other is not node and not isinstance(other, (ast.FunctionDef, ast.AsyncFunctionDef)) and any(
                isinstance(n, ast.Name) and n.id == name and isinstance(n.ctx, ast.Load) for n in ast.walk(other)):
            raise Refused(f"another statement of {qualname.rpartition('.')[0]}'s body reads {name}; its value "
                          "would not follow")
    try:
        return eval(compile(ast.Expression(node.value), f"<fixmono hot-fix of {qualname}>", "eval"),  # noqa: S307
                    vars(module), dict(vars(owner)))
    except Exception as err:  # noqa: BLE001 - any failure of the value is a refusal, said in one line
        raise Refused(f"the new value of {qualname} cannot be evaluated here ({type(err).__name__}: {err})") from None


def compiled(new_source: str, qualname: str, module, path: str):
    """The new def of `qualname`, decorators run, in the module's own namespace;
    a method's zero-argument super() cell set to its real class."""
    node = functions(ast.parse(new_source))[qualname]
    owner = resolve(module, qualname.rpartition(".")[0]) if "." in qualname else None
    unit = ast.Module(body=[node], type_ignores=[])
    if owner is not None:  # inside a class body: super() and __class__ get their cell
        unit = ast.Module(body=[ast.ClassDef(name=owner.__name__, bases=[], keywords=[], body=[node],
                                             decorator_list=[])], type_ignores=[])
    ast.fix_missing_locations(unit)
    scope: dict = {}
    exec(compile(unit, f"<fixmono hot-fix of {path}>", "exec"), vars(module), scope)  # noqa: S102
    value = scope[node.name] if owner is None else vars(scope[owner.__name__])[node.name]
    # the function holding the body (a decorator's wrapper has its own closure, made by the decorator)
    function = held_body(value, node.name) or getattr(value, "__func__", getattr(value, "fget", value))
    for name, cell in zip(getattr(function, "__code__", None) and function.__code__.co_freevars or (),
                          getattr(function, "__closure__", None) or ()):
        if name != "__class__":
            raise Refused(f"{qualname} has a closure over {name}; it cannot be swapped in")
        cell.cell_contents = owner
    return value


def resolve(module, dotted: str):
    target = module
    for part in dotted.split("."):
        target = getattr(target, part)
    return target


class Step(NamedTuple):
    """One swap: `target`.__code__ = value (kind "code"), or setattr(target, attr, value) (kind "name")."""

    kind: str
    target: object
    attr: str
    value: object
    where: str  # module.qualname, as the messages name it


SWAPPED: dict[str, list[Step]] = {}  # fix id or patch path -> the steps that undo its swaps, in enabling order


def holder(where: str) -> str | None:
    """The enabled hot-fix that has swapped `where`, if one has."""
    return next((key for key, steps in SWAPPED.items() if any(s.where == where for s in steps)), None)


def not_swappable(fix: Fix) -> str | None:
    """Why `fix`'s diff cannot be a hot-fix before anything is imported: a file
    it changes is not a Python module changed in place."""
    for change in fix.changes:
        transform = change.transform
        if transform.engine != "python":
            return f"{change.path} is not a Python module"
        if not isinstance(transform, DiffTransform):
            return getattr(transform, "description", f"the diff does not change {change.path} in place")
    return None


def enable(fix: Fix, key: str | None = None) -> str:
    """Swap in the functions `fix`'s diff changes, ported to the installed
    modules; known as `key` (a patch file's path) or else by the fix's id."""
    key = key or fix.id
    if SWAPPED.get(key):
        return "already enabled"
    if why := not_swappable(fix):
        return f"not enabled: {why}; a hot-fix swaps functions of Python modules changed in place (apply the " \
               "patch and rebuild)"
    plan = []
    for change in fix.changes:
        name = installed_module(PROJECTS[fix.upstream], change.path)
        try:
            module = importlib.import_module(name)
            source = inspect.getsource(module)
        except (ImportError, OSError, TypeError) as err:
            return f"not enabled: {name} cannot be read here ({type(err).__name__}: {err})"
        try:
            result = change.transform.rewrite(source)
        except NotApplicable:
            return f"{name}: the code the diff changes is not in this release; nothing to do"
        except (TargetSyntaxError, TransformFailed) as err:
            return f"not enabled: {name}: {err}"
        if not result.changed:
            continue  # this module already has it
        try:
            plan += planned(module, name, source, result.source, change.path)
        except Refused as err:
            return f"not enabled: {name}: {err}; nothing was changed"
        except Exception as err:  # noqa: BLE001 - e.g. a decorator that fails when run again: one line, nothing swapped
            return f"not enabled: {name}: cannot be prepared here ({type(err).__name__}: {err}); nothing was changed"
    if not plan:
        return "the installed modules already have the diff; nothing to do"
    done = []
    for step in plan:
        try:
            done.append(swapped(step))
        except Exception as err:  # noqa: BLE001 - e.g. an Enum refusing setattr: nothing is left half-swapped
            undo(done)
            return f"not enabled: {step.where}: cannot be set here ({type(err).__name__}: {err}); nothing was changed"
    SWAPPED[key] = done
    return f"enabled: {', '.join(step.where for step in plan)} from the diff, ported to the installed source"


def planned(module, name: str, source: str, new_source: str, path: str) -> list[Step]:
    """The steps that put `new_source`'s changed functions and class attributes
    in place in `module`; Refused where one cannot be swapped whole."""
    steps = []
    defs = functions(ast.parse(new_source))
    for qualname in changed_functions(source, new_source):
        where = f"{name}.{qualname}"
        if (other := holder(where)) is not None:
            raise Refused(f"{qualname} is changed already by hot-fix {other}; one function takes one hot-fix at a "
                          "time (disable that one first, or make one patch of both)")
        owner_name, _, attr = qualname.rpartition(".")
        owner = resolve(module, owner_name) if owner_name else module
        if qualname in defs:
            steps.append(def_step(owner, attr, compiled(new_source, qualname, module, path), where))
        else:
            steps.append(Step("name", owner, attr, attribute_value(new_source, qualname, module, owner), where))
    return steps


def held_body(value, name: str) -> types.FunctionType | None:
    """The function compiled from the def `name` inside what a module or class
    holds: the value itself, what a staticmethod or classmethod holds, what a
    wrapper names as __wrapped__, or a function a wrapper closes over (a
    metaclass or class decorator may wrap methods without saying what it
    wraps). Told apart by the name the code was compiled under."""
    todo, seen = [value], set()
    while todo and len(seen) < 64:
        item = todo.pop(0)
        if item is None or id(item) in seen:
            continue
        seen.add(id(item))
        if isinstance(item, types.FunctionType) and item.__code__.co_name == name:
            return item
        if isinstance(item, (staticmethod, classmethod)):
            todo.append(item.__func__)
        todo.append(getattr(item, "__wrapped__", None))
        if isinstance(item, types.FunctionType):
            todo += [cell.cell_contents for cell in item.__closure__ or () if cell_filled(cell)]
    return None


def cell_filled(cell) -> bool:
    try:
        cell.cell_contents
    except ValueError:  # a cell not set yet
        return False
    return True


def def_step(owner, attr: str, value, where: str) -> Step:
    """How to put the new def `value` in place of owner.attr. The function
    holding the body keeps its object and gets the new code, so every holder
    of it or of its wrapper (a registry, `from m import f`, a metaclass's
    wrapper) runs the fix. Rebound by name only where nothing wraps it beyond
    what compiling the def again gives; refused where that would lose a wrapper."""
    installed = vars(owner)[attr]
    old, new = held_body(installed, attr), held_body(value, attr)
    if old is not None:
        refuse_closures_alive(old, where)
    if old is not None and new is not None and old.__code__.co_freevars == new.__code__.co_freevars:
        return Step("code", old, "__code__", new.__code__, where)
    if old is installed or (old is None and new is None and type(installed) is type(value)):
        return Step("name", owner, attr, value, where)
    if old is None:
        raise Refused(f"{where} is held in a wrapper (its class's metaclass, a class decorator, __init_subclass__ "
                      "or a decorator) that does not name the function it wraps; swapping it by name would lose "
                      "the wrapper")
    raise Refused(f"{where}: the new body reads other enclosing names than the one in its wrapper; it cannot be "
                  "swapped into the wrapper")


def refuse_closures_alive(function: types.FunctionType, where: str) -> None:
    """Refused where a function that `function` made (a nested def or lambda)
    is alive: it keeps the old code and the values it closed over, whatever is swapped."""
    nested = {id(c) for c in nested_codes(function.__code__)}
    if not nested:
        return
    alive = next((f for f in gc.get_objects() if isinstance(f, types.FunctionType) and id(f.__code__) in nested), None)
    if alive is not None:
        raise Refused(f"{where} made {alive.__qualname__}, which is alive (a closure made at import is not reached: "
                      "it keeps the old code)")


def nested_codes(code: types.CodeType) -> list[types.CodeType]:
    inner = [c for c in code.co_consts if isinstance(c, types.CodeType)]
    return inner + [n for c in inner for n in nested_codes(c)]


def swapped(step: Step) -> Step:
    """Make `step`; returns the step that undoes it."""
    old = step.target.__code__ if step.kind == "code" else vars(step.target)[step.attr]
    setattr(step.target, step.attr, step.value)
    return step._replace(value=old)


def undo(steps: list[Step]) -> None:
    """Undo the steps swapped() made, last first."""
    for step in reversed(steps):
        swapped(step)


def disable(fix: Fix, key: str | None = None) -> str:
    return disable_id(key or fix.id)


def disable_id(key: str) -> str:
    steps = SWAPPED.pop(key, None)
    if not steps:
        return "not enabled; nothing to do"
    undo(steps)
    return "disabled: the installed functions are back"


def enabled_patches() -> list[str]:
    """The patch files enabled now (patch_key), in the order they were enabled."""
    return [key for key in SWAPPED if is_patch(key)]


def patch_key(path: str) -> str:
    """A patch file's hot-fix is known by its absolute path, not its fix id
    (made from its subject): two patches with one subject are two hot-fixes."""
    return os.path.abspath(path)


def from_patch(path: str) -> Fix:
    """A patch file named in FIXMONO_HOTFIXES or enable_hotfixes: its diff fix, with its hot-fix."""
    try:
        (fix,) = diff_fixes([read_patch(Path(path))])
    except UserError as err:
        raise ValueError(str(err)) from None
    key = patch_key(path)
    # no trigger where a file is not a Python module changed in place: enable() says why at once, importing nothing
    trigger = "" if not_swappable(fix) else installed_module(PROJECTS[fix.upstream], fix.changes[0].path)
    return dataclasses.replace(fix, hotfix=HotFix(apply=functools.partial(enable, fix, key),
                                                  remove=functools.partial(disable, fix, key), trigger=trigger))


def is_patch(name: str) -> bool:
    return name.endswith((".patch", ".diff"))
