"""The cyclic garbage collector paused while the engine builds syntax trees
and the names of their scopes: hundreds of thousands of new objects without
reference cycles, whose allocation set off collections that each walked every
object the process holds (about a tenth of a port's time on a release's big
files). What a paused stretch leaves cyclic is collected once it ends."""
from __future__ import annotations

import ast
import contextlib
import gc


@contextlib.contextmanager
def gc_paused():
    paused = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if paused:
            gc.enable()


def parse(text: str) -> ast.Module:
    """ast.parse(text), the collector paused: its errors (SyntaxError, ValueError, RecursionError) as ast raises them."""
    with gc_paused():
        return ast.parse(text)
