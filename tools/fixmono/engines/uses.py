"""After placing, the uses: what a diff's added lines import, read on
`self`/`cls` and pass as keywords must be there in the target tree (issue 42).

Only the uses the diff adds are judged (a use the file already had is the
release's own business). The other files of the tree are read through a
callback, never imported. Everything that cannot be resolved for sure is
taken as there: a star import, a module or class `__getattr__`, `setattr`, a
name given as a string, a base class or decorator this module cannot read, a
module that is not a readable file (compiled, not materialised). A miss is
reported only where it is certain. C/C++ files: their added calls, best
effort (uses_cpp.py).
"""
from __future__ import annotations

import ast
import functools
import posixpath
from typing import Callable

from fixmono.engines.port import CPP, FUNCTIONS, scope_names
from fixmono.engines.trees import parse
from fixmono.engines.uses_cpp import unresolved_calls
from fixmono.model.patchfile import new_line_numbers

Read = Callable[[str], "bytes | None"]
UNKNOWN = object()  # could not be resolved: taken as there
MISSING = object()  # certainly not there
# decorators known to leave a class's attributes, or a function's keywords, as written
SAFE_CLASS_DECORATORS = {"dataclass", "total_ordering", "final", "runtime_checkable"}
SAFE_DEF_DECORATORS = {"staticmethod", "classmethod", "abstractmethod", "final", "override", "lru_cache", "cache",
                       "no_grad", "inference_mode", "property"}
SOURCES = (".py", ".pyi", ".pyx", ".pxd")


def unresolved_uses(path: str, old_text: str, new_text: str, read: Read, whole_tree: bool = False,
                    pre_image: str | None = None) -> list[str]:
    """What the lines `new_text` adds to `old_text` (the file at `path`) use and
    the tree lacks, one line each ("the change reads `self.x` (line 3), which
    `C` never sets in this release"). `read(path)` gives another file of the
    tree (None: not there); `whole_tree`: every file can be read, so a module
    that reads as None is not there (else it may just not be at hand).
    C/C++ files: the calls they add (uses_cpp.py; `pre_image`: the file the
    diff was made on, which tells a function of upstream's file apart)."""
    if path.endswith(CPP):
        return unresolved_calls(path, old_text, new_text, read, pre_image)[0]
    if not path.endswith(".py"):
        return []
    try:
        old, new = parse(old_text), parse(new_text)
    except (SyntaxError, ValueError):
        return []
    rows = new_line_numbers(old_text, new_text)
    if not rows:
        return []
    tree = Tree(read, whole_tree, {path: new})
    found = [(key, line, problem) for key, line, judge in uses(tree.indexed(path), rows)
             if line in rows and (problem := judge())]
    if not found:
        return []
    had = {key for key, _, _ in uses(Module(tree, path, old))}  # read only where needed: a big file costs
    return list(dict.fromkeys(problem.replace("(line)", f"(line {line})")
                              for key, line, problem in found if key not in had))


def name_of(node: ast.AST) -> str:
    """A decorator's or base's last name: `functools.lru_cache(1)` -> lru_cache."""
    node = node.func if isinstance(node, ast.Call) else node
    return node.attr if isinstance(node, ast.Attribute) else getattr(node, "id", "")


class Tree:
    """The target's files, read and parsed once each."""

    def __init__(self, read: Read, whole_tree: bool, parsed: dict[str, ast.Module]):
        self.read, self.whole_tree, self.parsed = read, whole_tree, dict(parsed)
        self.modules: dict[str, Module] = {}

    def indexed(self, path: str) -> "Module":
        """The Module of a file `module(path)` reads (indexed once)."""
        if path not in self.modules:
            self.modules[path] = Module(self, path, self.module(path))
        return self.modules[path]

    def module(self, path: str) -> ast.Module | None:
        """The parsed file, or None where it is not there or cannot be read or parsed."""
        if path not in self.parsed:
            try:
                data = self.read(path)
                self.parsed[path] = None if data is None else parse(data.decode("utf-8"))
            except Exception:  # noqa: BLE001 -- an unreadable file (partial clone, not UTF-8, syntax): unknown
                self.parsed[path] = None
        return self.parsed[path]

    def find(self, base: str) -> str | object:
        """The file of the module at `base` (a path without .py): `base`.py or
        `base`/__init__.py; MISSING where it is certainly not there (the whole
        tree is read, its package is there, or certainly not, and no other source
        of it is); else UNKNOWN."""
        for path in (base + ".py", base + "/__init__.py"):
            if self.module(path) is not None:
                return path
        folder = posixpath.dirname(base)
        if not self.whole_tree or not folder or posixpath.basename(base).startswith("_") \
                or any(self.read_ok(base + s) or self.read_ok(base + "/__init__" + s) for s in SOURCES):
            return UNKNOWN  # may be there as no readable file: a stub, an extension module ("_C")
        if self.module(folder + "/__init__.py") is not None:
            return MISSING
        return MISSING if self.find(folder) is MISSING else UNKNOWN

    def read_ok(self, path: str) -> bool:
        try:
            return self.read(path) is not None
        except Exception:  # noqa: BLE001
            return True  # there, if unreadable

    def root(self, path: str) -> tuple[str, str] | None:
        """(folder holding the top package, its name) of the file at `path`: the
        highest folder up from it with an __init__.py, each one between too."""
        folder, top = posixpath.dirname(path), None
        while folder and self.module(folder + "/__init__.py") is not None:
            top, folder = folder, posixpath.dirname(folder)
        return (posixpath.dirname(top), posixpath.basename(top)) if top else None


class Module:
    """One module of the tree: what it binds at its top level, and its uses."""

    def __init__(self, tree: Tree, path: str, node: ast.Module):
        self.tree, self.path, self.node = tree, path, node
        self.binds: dict[str, list[ast.AST]] = {}
        self._index(node.body)

    @functools.cached_property
    def stored(self) -> set[str]:
        """Attributes assigned anywhere here (`x.attr = ...`): attr may be on any class of the module."""
        return {n.attr for n in ast.walk(self.node) if isinstance(n, ast.Attribute) and not isinstance(n.ctx, ast.Load)}

    @functools.cached_property
    def strings(self) -> set[str]:
        """Strings anywhere here: a name given as a string (setattr, hasattr, register_buffer)."""
        return {n.value for n in ast.walk(self.node) if isinstance(n, ast.Constant) and isinstance(n.value, str)}

    @functools.cached_property
    def dynamic(self) -> bool:
        """Names made at run time: a module __getattr__, a star import, globals(), sys.modules, `global`."""
        return "__getattr__" in self.binds or any(
            isinstance(n, ast.Name) and n.id == "globals" or isinstance(n, ast.Attribute) and n.attr == "modules"
            or isinstance(n, ast.ImportFrom) and any(a.name == "*" for a in n.names) or isinstance(n, ast.Global)
            for n in ast.walk(self.node))

    def _index(self, body: list[ast.stmt]) -> None:
        """The names the statements bind, into if/try/with/for bodies, not into defs and classes."""
        for stmt in body:
            for name in scope_names(ast.Module([stmt], [])):
                self.binds.setdefault(name, []).append(stmt)
            if isinstance(stmt, ast.Assign) and any(getattr(t, "id", "") == "__all__" for t in stmt.targets):
                for item in ast.walk(stmt.value):  # __all__ names what the module has
                    if isinstance(item, ast.Constant) and isinstance(item.value, str):
                        self.binds.setdefault(item.value, []).append(stmt)

    # --- where an import leads ------------------------------------------------------------------

    def module_base(self, module: str | None, level: int) -> str | None:
        """The path (without .py) an import's module names, where it is in this file's package; else None."""
        if level:
            folder = posixpath.dirname(self.path)
            for _ in range(level - 1):
                folder = posixpath.dirname(folder)
            return posixpath.join(folder, *(module.split(".") if module else []))
        root = self.tree.root(self.path)
        if root is None or module is None or module.split(".")[0] != root[1]:
            return None  # outside the target's package: not ours to judge
        return posixpath.join(root[0], *module.split("."))

    def lookup(self, name: str, depth: int = 0):
        """What `name` is at this module's top level: a def or class (with the
        module defining it), a module's file, MISSING, or UNKNOWN."""
        found = self.binds.get(name)
        if not found:
            if self.path.endswith("/__init__.py"):  # a submodule of the package is an attribute once imported
                sub = self.tree.find(posixpath.join(posixpath.dirname(self.path), name))
                if sub is not MISSING:
                    return sub
            return UNKNOWN if self.dynamic else MISSING
        if len(found) != 1 or depth > 8:
            return UNKNOWN
        (node,) = found
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            return (node, self)
        if isinstance(node, ast.ImportFrom):
            alias = next(a for a in node.names if (a.asname or a.name) == name)
            base = self.module_base(node.module, node.level)
            target = self.tree.find(base) if base else UNKNOWN
            if isinstance(target, str):
                return self.tree.indexed(target).lookup(alias.name, depth + 1)
        if isinstance(node, ast.Import):  # import pkg.mod as m
            alias = next((a for a in node.names if a.asname == name), None)
            if alias and (base := self.module_base(alias.name, 0)):
                return self.tree.find(base)
        return UNKNOWN

    def module_at(self, target) -> "Module | None":
        return self.tree.indexed(target) if isinstance(target, str) else None

    # --- the uses -------------------------------------------------------------------------------

    def class_attrs(self, cls: ast.ClassDef, depth: int = 0) -> set[str] | object:
        """Every attribute the class or its bases define or assign, or UNKNOWN."""
        if depth > 8 or cls.keywords or any(name_of(d) not in SAFE_CLASS_DECORATORS for d in cls.decorator_list):
            return UNKNOWN  # a metaclass or decorator may add attributes
        names = set(scope_names(cls)) | self.stored  # `x.attr = ...` anywhere in the module: may be on it
        for node in ast.walk(cls):
            if isinstance(node, ast.Call) and name_of(node.func) in ("setattr", "__setattr__") \
                    or isinstance(node, ast.Attribute) and node.attr == "__dict__":
                return UNKNOWN
        if names & {"__getattr__", "__getattribute__"}:
            return UNKNOWN
        for base in cls.bases:
            found = self.base_class(base)
            if found is UNKNOWN:
                return UNKNOWN
            if found is not None:
                more = found[1].class_attrs(found[0], depth + 1)
                if more is UNKNOWN:
                    return UNKNOWN
                names |= more
        return names

    def base_class(self, base: ast.expr):
        """(class, its module) a base names, None for `object` (nothing to add), else UNKNOWN."""
        if isinstance(base, ast.Name) and base.id == "object":
            return None
        if isinstance(base, ast.Subscript) and name_of(base.value) in ("Generic", "Protocol"):
            return None  # typing's: they add no attributes a method reads
        found = self.resolve(base)
        return found if isinstance(found, tuple) and isinstance(found[0], ast.ClassDef) else UNKNOWN

    def resolve(self, node: ast.expr):
        """A Name or `module.name` to what it names at the top level (see lookup)."""
        if isinstance(node, ast.Name):
            return self.lookup(node.id)
        if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name):
            module = self.module_at(self.lookup(node.value.id))
            return module.lookup(node.attr) if module else UNKNOWN
        return UNKNOWN


def uses(module: Module, rows: set[int] | None = None):
    """(key, line, judge) for each use (in a def or class holding one of `rows`,
    where given): `judge()` says what is missing (with "(line)" where the line
    goes), or None. Keys compare a use across two versions of the file."""
    def near(node: ast.AST) -> bool:
        start = min([node.lineno, *(d.lineno for d in getattr(node, "decorator_list", ()))])  # decorators above
        return rows is None or any(start <= row <= node.end_lineno for row in rows)

    nodes = list(walk_near(module.node, near))
    yield from import_uses(module, nodes)
    for cls in (n for n in nodes if isinstance(n, ast.ClassDef)):
        for method in cls.body:
            if isinstance(method, (ast.FunctionDef, ast.AsyncFunctionDef)) and near(method):
                yield from method_uses(module, cls, method)
    yield from keyword_uses(module, near)


def walk_near(node: ast.AST, near):
    """ast.walk, into the statements `near` keeps only."""
    todo = [node]
    while todo:
        node = todo.pop()
        yield node
        todo.extend(child for child in ast.iter_child_nodes(node) if not isinstance(child, ast.stmt) or near(child))


def import_uses(module: Module, nodes: list[ast.AST]):
    for node in nodes:
        if isinstance(node, ast.ImportFrom) and node.module != "__future__":
            base = module.module_base(node.module, node.level)
            shown = "." * node.level + (node.module or "")
            if base is None:
                continue
            for alias in node.names:
                if alias.name != "*":
                    yield ("import", base, alias.name), alias.lineno, \
                        lambda base=base, alias=alias, shown=shown: imported(module, base, alias.name, shown)
        elif isinstance(node, ast.Import):
            for alias in node.names:
                if base := module.module_base(alias.name, 0):
                    yield ("import", base, ""), alias.lineno, \
                        lambda base=base, alias=alias: missing_module(module, base, alias.name)


def missing_module(module: Module, base: str, shown: str) -> str | None:
    if module.tree.find(base) is MISSING:  # (or a package above it)
        return f"the change imports `{shown}` (line), which this release does not have"
    return None


def imported(module: Module, base: str, name: str, shown: str) -> str | None:
    target = module.tree.find(base)
    if target is MISSING:
        return missing_module(module, base, shown)
    other = module.module_at(target)
    if other is not None and other.lookup(name) is MISSING:
        return f"the change imports `{name}` from `{shown}` (line), which that module does not define in this release"
    return None


def method_uses(module: Module, cls: ast.ClassDef, method: ast.FunctionDef):
    """`self.X` / `cls.X` reads in one method (its first parameter's attributes)."""
    params = [*method.args.posonlyargs, *method.args.args]
    if not params or any(name_of(d) == "staticmethod" for d in method.decorator_list):
        return
    me = params[0].arg
    for node in walk_own(method, me):
        if isinstance(node, ast.Attribute) and isinstance(node.ctx, ast.Load) \
                and isinstance(node.value, ast.Name) and node.value.id == me:
            yield ("attr", cls.name, node.attr), node.lineno, \
                lambda node=node: never_set(module, cls, node.attr, me)


def walk_own(method: ast.AST, me: str):
    """The nodes of a method's body, not of a nested def or lambda whose own parameter `me` is."""
    todo = list(method.body)
    while todo:
        node = todo.pop()
        if isinstance(node, FUNCTIONS) and me in {a.arg for a in ast.walk(node.args) if isinstance(a, ast.arg)}:
            continue
        yield node
        todo.extend(ast.iter_child_nodes(node))


def never_set(module: Module, cls: ast.ClassDef, attr: str, me: str) -> str | None:
    if attr in module.strings or attr.startswith("__") and attr.endswith("__"):
        return None  # named as a string (setattr, hasattr, register_buffer) or a dunder Python gives
    names = module.class_attrs(cls)
    if names is UNKNOWN or attr in names:
        return None
    if "__init__" not in names and not any(name_of(d) == "dataclass" for d in cls.decorator_list):
        return None  # a mixin: its instances are made by the classes it is mixed into, which may set it
    return f"the change reads `{me}.{attr}` (line), which `{cls.name}` never sets in this release"


def keyword_uses(module: Module, near=lambda node: True):
    """`f(k=...)` calls whose callee this module resolves by name (its own def or
    class, one imported from the target's package, a method of `self`'s class)."""
    def visit(node: ast.AST, locals_: set[str], cls: ast.ClassDef | None, me: str | None) -> None:
        if isinstance(node, (ast.ClassDef, *FUNCTIONS)) and not near(node):
            return
        if isinstance(node, ast.ClassDef):
            for part in [*node.decorator_list, *node.bases, *node.keywords]:
                visit(part, locals_, cls, me)
            for part in node.body:  # a method sees its class as `self`; the class body sees its own names
                first = isinstance(part, FUNCTIONS) and [*part.args.posonlyargs, *part.args.args]
                visit(part, locals_ | (set() if first is not False else set(scope_names(node))), node,
                      first[0].arg if first else None)
            return
        if isinstance(node, FUNCTIONS):
            locals_ = locals_ | set(scope_names(node))
            cls, me = (cls, me) if me in locals_ else (None, None)
        if isinstance(node, ast.Call):
            for kw in node.keywords:
                if kw.arg is not None:
                    found.append((ast.unparse(node.func), kw, node.func, locals_, cls, me))
        for child in ast.iter_child_nodes(node):
            visit(child, locals_, cls, me)

    found: list = []
    visit(module.node, set(), None, None)
    for callee, kw, func, locals_, cls, me in found:
        yield ("keyword", callee, kw.arg), kw.lineno, \
            lambda callee=callee, kw=kw, func=func, locals_=locals_, cls=cls, me=me: \
            refused(module, callee, kw.arg, callee_of(module, func, locals_, cls, me))


def callee_of(module: Module, func: ast.expr, locals_: set[str], cls, me):
    """The def or class a call's function names, as (node, module, bound), else UNKNOWN."""
    if isinstance(func, ast.Name) and func.id in locals_:
        return UNKNOWN  # a local name: anything
    if isinstance(func, ast.Attribute) and isinstance(func.value, ast.Name) and func.value.id == me and cls:
        found = method_of(module, cls, func.attr)
        return (*found, True) if isinstance(found, tuple) else UNKNOWN
    if isinstance(func, ast.Attribute) and isinstance(func.value, ast.Name) and func.value.id in locals_:
        return UNKNOWN
    found = module.resolve(func)
    return (*found, False) if isinstance(found, tuple) else UNKNOWN


def method_of(module: Module, cls: ast.ClassDef, name: str, depth: int = 0):
    """The def `name` of the class or its first base that has it, else UNKNOWN."""
    if depth > 8 or module.class_attrs(cls) is UNKNOWN:
        return UNKNOWN
    mine = [n for n in cls.body if name in scope_names(ast.Module([n], []))]
    if mine:
        return (mine[0], module) if len(mine) == 1 and isinstance(mine[0], (ast.FunctionDef, ast.AsyncFunctionDef)) \
            else UNKNOWN
    for base in cls.bases:
        found = module.base_class(base)
        if found is UNKNOWN:
            return UNKNOWN
        if found is not None and (got := method_of(found[1], found[0], name, depth + 1)) is not MISSING:
            return got
    return MISSING


def refused(module: Module, callee: str, keyword: str, found) -> str | None:
    if not isinstance(found, tuple):
        return None
    node, where, _ = found
    takes = accepts(where, node)
    if takes is UNKNOWN or keyword in takes:
        return None
    return f"the change passes `{keyword}=` to `{callee}` (line), which does not take it in this release"


def accepts(module: Module, node: ast.AST, depth: int = 0) -> set[str] | object:
    """The keywords a def takes, or a class's constructor; UNKNOWN where any are welcome or it cannot tell."""
    if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
        args = node.args
        if args.kwarg or any(name_of(d) not in SAFE_DEF_DECORATORS for d in node.decorator_list):
            return UNKNOWN  # **kwargs, or a decorator that may take others
        return {a.arg for a in (*args.args, *args.kwonlyargs)}
    if depth > 8 or module.class_attrs(node) is UNKNOWN:
        return UNKNOWN
    init = method_of(module, node, "__init__")
    if method_of(module, node, "__new__") is not MISSING or init is UNKNOWN:
        return UNKNOWN
    if init is not MISSING:
        return accepts(init[1], init[0], depth + 1)
    if any(name_of(d) == "dataclass" for d in node.decorator_list):
        return dataclass_fields(module, node)
    return set()  # object's: no keywords


def dataclass_fields(module: Module, cls: ast.ClassDef, depth: int = 0) -> set[str] | object:
    """A dataclass's fields, its bases' too (UNKNOWN where a base cannot be read)."""
    if depth > 8 or any(isinstance(d, ast.Call) for d in cls.decorator_list):
        return UNKNOWN  # dataclass(init=False, kw_only=...): not worth reading
    names = {n.target.id for n in cls.body if isinstance(n, ast.AnnAssign) and isinstance(n.target, ast.Name)}
    for base in cls.bases:
        found = module.base_class(base)
        if found is UNKNOWN:
            return UNKNOWN
        if found is not None:
            more = dataclass_fields(found[1], found[0], depth + 1)
            if more is UNKNOWN:
                return UNKNOWN
            names |= more
    return names
