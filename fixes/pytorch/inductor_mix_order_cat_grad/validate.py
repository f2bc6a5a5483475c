"""--validate: the written simd.py's `_codegen_mix_order_reduction`, run on a
double of Inductor's state (no GPU): two partial reductions, one into a buffer
that is a view into another (NonOwningLayout), one into a buffer of its own.
The wrapper code it emits must write the first through the view (copy_, after
its allocation) and bind the second as before. Uses the installed torch's
`ir` layouts when torch is importable, else a stand-in class."""
from __future__ import annotations

import ast
from types import SimpleNamespace
from typing import Mapping

from .fix import TARGET
from .transform import FUNCTION


class _Wrapper:
    def __init__(self) -> None:
        self.lines: list[str] = []
        self.allocated: set[str] = set()

    def writeline(self, line: str) -> None:
        self.lines.append(line)

    def codegen_allocation(self, buffer) -> None:
        self.lines.append(f"allocate {buffer.name}")

    def codegen_python_sizevar(self, value) -> str:
        return str(value)


def _buffer(name: str, layout) -> SimpleNamespace:
    """What the loop reads of an Inductor buffer: its name, layout (and its size), output spec."""
    return SimpleNamespace(name=name, layout=layout, get_layout=lambda: SimpleNamespace(size=[1024]),
                           get_output_spec=lambda: layout)


def emitted(text: str) -> list[str]:
    """Run the function of `text` on the double; the wrapper lines it writes."""
    try:
        from torch._inductor import ir
    except ImportError:
        ir = SimpleNamespace(NonOwningLayout=type("NonOwningLayout", (), {}), FixedLayout=type("FixedLayout", (), {}),
                             FlexibleLayout=type("FlexibleLayout", (), {}), Buffer=SimpleNamespace)
    tree = ast.parse(text)
    cls = next(n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == FUNCTION.split(".")[0])
    function = next(n for n in cls.body if isinstance(n, ast.FunctionDef) and n.name == FUNCTION.split(".")[1])
    wrapper = _Wrapper()
    buffers = {name: _buffer(name, layout.__new__(layout))
               for name, layout in (("buf_view", ir.NonOwningLayout), ("buf_own", ir.FixedLayout))}
    graph = SimpleNamespace(wrapper_code=wrapper, get_buffer=buffers.get, get_dtype=lambda name: "float32",
                            removed_buffers=set())
    kernel = SimpleNamespace(saved_partial_accumulate=[SimpleNamespace(buffer_name=b, reduction_type="sum")
                                                       for b in buffers],
                             deallocate_workspaces=lambda: None)
    # every name the loop reads besides those: stand-ins with the values the real function computes
    scope = {"ir": ir, "V": SimpleNamespace(graph=graph), "torch": SimpleNamespace(float="float32"),
             "kernel": kernel, "ws_name": "ws", "nsplit": "4", "rnumel": "1024", "numel": "4096",
             "split_size": "1024", "config": SimpleNamespace()}
    loop = next(n for n in ast.walk(function) if isinstance(n, ast.For) and "saved_partial_accumulate" in ast.unparse(n.iter))
    exec(compile(ast.Module(body=[loop], type_ignores=[]), "<final reduce loop>", "exec"), scope)  # noqa: S102
    return wrapper.lines


def check(before: Mapping[str, str], after: Mapping[str, str]) -> str | None:
    try:
        lines = emitted(after[TARGET])
    except Exception as err:  # noqa: BLE001 - the written text could not run on the double: say why
        return f"the final reduce loop does not run on a double of Inductor's state: {type(err).__name__}: {err}"
    through = [line for line in lines if line.startswith("buf_view.copy_(")]
    if not through or "allocate buf_view" not in lines or lines.index("allocate buf_view") > lines.index(through[0]):
        return f"the view's final reduce is not written through it after its allocation: {lines}"
    if any(line.startswith("buf_view = ") for line in lines):
        return f"the view's name is rebound: {lines}"
    if not any(line.startswith("buf_own = ") for line in lines):
        return f"a buffer of its own is no longer bound to its reduce: {lines}"
    return None
