"""The runtime form of a diff fix: the functions and methods the diff changes,
compiled from the ported source of the installed module (the port engine on
the module's own file, so the installed release's text, not the diff's), in
that module's namespace, and swapped in; a class attribute whose value the
diff changes (`name = value` in a class body) is set to the new value,
evaluated as its class body would. Nothing else is touched: a diff that
changes module statements, decorators, signatures, or adds or removes a
function or attribute is refused with one line saying so, and so is one whose module is
not importable here. The function holding a def's body (the def, or what
its decorator's wrapper names as __wrapped__) keeps its object and gets the
new code, so a registry holding it or a `from m import f` made before runs
the fix too (what a decorator cached of earlier calls, e.g. jax.jit's traces,
is kept); a decorated def without __wrapped__ is rebound by name, and callers
holding the old wrapper keep it, as with any monkeypatch.

    enable(fix) / disable(fix)   a diff fix's HotFix (engines/imported.runtime_form makes it)
    from_patch(path)   a patch file's diff fix with its hot-fix (FIXMONO_HOTFIXES=path.patch)
"""
from __future__ import annotations

import ast
import dataclasses
import importlib
import inspect
import types
from pathlib import Path

from fixmono.engines.imported import runtime_form
from fixmono.engines.port import DiffTransform, diff_fixes
from fixmono.model.errors import NotApplicable, TargetSyntaxError, TransformFailed, UserError
from fixmono.model.fix import Fix
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
    function = body_of(value, node.name) or getattr(value, "__func__", getattr(value, "fget", value))
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


SWAPPED: dict[str, list[tuple]] = {}  # fix id -> how to undo each swap (swap())


def enable(fix: Fix) -> str:
    """Swap in the functions `fix`'s diff changes, ported to the installed modules."""
    if SWAPPED.get(fix.id):
        return "already enabled"
    plan = []
    for change in fix.changes:
        if not isinstance(change.transform, DiffTransform) or change.transform.engine != "python":
            return f"not enabled: {change.path} is not a Python module changed in place"
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
            defs = functions(ast.parse(result.source))
            for qualname in changed_functions(source, result.source):
                owner_name, _, attr = qualname.rpartition(".")
                owner = resolve(module, owner_name) if owner_name else module
                value = compiled(result.source, qualname, module, change.path) if qualname in defs else \
                    attribute_value(result.source, qualname, module, owner)
                plan.append((owner, attr, value, f"{name}.{qualname}"))
        except Refused as err:
            return f"not enabled: {name}: {err}"
    if not plan:
        return "the installed modules already have the diff; nothing to do"
    done = []
    for owner, attr, value, where in plan:
        try:
            done.append(swap(owner, attr, value))
        except Exception as err:  # noqa: BLE001 - e.g. an Enum refusing setattr: nothing is left half-swapped
            undo(done)
            return f"not enabled: {where}: cannot be set here ({type(err).__name__}: {err}); nothing was changed"
    SWAPPED[fix.id] = done
    return f"enabled: {', '.join(where for *_, where in plan)} from the diff, ported to the installed source"


def body_of(value, name: str) -> types.FunctionType | None:
    """The function object that holds the body of the def `name`: the def itself
    (no decorator but staticmethod or classmethod, or one such as
    `@functools.wraps(other)` that only copies another's docs), or the function a
    decorator's wrapper names as its __wrapped__ (functools.wraps closures,
    jax.jit): told apart by the name the code was compiled under."""
    value = getattr(value, "__func__", value) if isinstance(value, (staticmethod, classmethod)) else value
    if isinstance(value, types.FunctionType) and value.__code__.co_name == name:
        return value
    wrapped = getattr(value, "__wrapped__", None)
    return wrapped if isinstance(wrapped, types.FunctionType) and wrapped.__code__.co_name == name else None


def swap(owner, attr: str, value) -> tuple:
    """Put `value` in place of owner.attr; returns how to undo it. The function
    holding the body keeps its object and gets the new code, so every
    reference to it or to its decorator's wrapper runs the fix (a registry
    that holds it, `from m import f` done before); other decorated defs are
    rebound by name only."""
    installed = vars(owner)[attr]
    old, new = body_of(installed, attr), body_of(value, attr)
    if old is not None and new is not None and old is not new and \
            old.__code__.co_freevars == new.__code__.co_freevars and type(installed) is type(value):
        code = old.__code__
        old.__code__ = new.__code__
        return ("code", old, code)
    setattr(owner, attr, value)
    return ("name", owner, attr, installed)


def disable(fix: Fix) -> str:
    swapped = SWAPPED.pop(fix.id, None)
    if not swapped:
        return "not enabled; nothing to do"
    undo(swapped)
    return "disabled: the installed functions are back"


def undo(swapped: list[tuple]) -> None:
    """Put back what swap() changed, last first."""
    for step in reversed(swapped):
        if step[0] == "code":
            step[1].__code__ = step[2]
        else:
            setattr(*step[1:])


def from_patch(path: str) -> Fix:
    """A patch file named in FIXMONO_HOTFIXES or enable_hotfixes: its diff fix, with its hot-fix."""
    try:
        (fix,) = diff_fixes([read_patch(Path(path))])
    except UserError as err:
        raise ValueError(str(err)) from None
    return dataclasses.replace(fix, hotfix=runtime_form(fix))


def is_patch(name: str) -> bool:
    return name.endswith((".patch", ".diff"))
