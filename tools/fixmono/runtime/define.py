"""Runtime forms of source fixes: functions defined again from transformed
module text, with the installed module's globals, so a hot-fix runs exactly
the code the patch would put in the file."""
from __future__ import annotations

import ast
import importlib
import inspect
from types import ModuleType
from typing import Callable


def define(source: str, qualname: str, namespace: dict) -> Callable:
    """The function `qualname` ("name" or "Class.method") of `source`, defined
    in a copy of `namespace` (the module's globals)."""
    body: list[ast.stmt] = ast.parse(source).body
    *owners, name = qualname.split(".")
    for owner in owners:
        (cls,) = [n for n in body if isinstance(n, ast.ClassDef) and n.name == owner]
        body = cls.body
    (node,) = [n for n in body if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef)) and n.name == name]
    scope = dict(namespace)
    exec(compile(ast.Module(body=[node], type_ignores=[]), f"<{qualname}>", "exec"), scope)  # noqa: S102
    return scope[name]


def module_source(module: str | ModuleType) -> str:
    module = importlib.import_module(module) if isinstance(module, str) else module
    return inspect.getsource(module)


def module_from(source: str, name: str, package: str) -> ModuleType:
    """`source` run as a fresh module `name` of `package` (relative imports
    resolve there), not entered in sys.modules."""
    module = ModuleType(name)
    module.__package__ = package
    exec(compile(source, f"<{name}>", "exec"), vars(module))  # noqa: S102
    return module
