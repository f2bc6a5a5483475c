"""The code the fix is about, run for real: the installed torch's
partitioner functions with the transformation applied (defined from the
transformed file text with the module's globals, so the hot-fix and the
reproducer run exactly what the patch writes), and the probe that tells
whether a compiled backward used the forward's randomness."""
from __future__ import annotations

import contextlib

MODULE = "torch._functorch.partitioners"
REPLACED = ("OpTypes.is_random", "choose_saved_values_set")
N = 4096


def module():
    import importlib

    return importlib.import_module(MODULE)


def functions_from(text: str) -> dict:
    """qualname -> function, defined from `text` as it is."""
    from fixmono.runtime.define import define

    return {name: define(text, name, vars(module())) for name in REPLACED}


def fixed_functions() -> dict:
    """The installed file's functions with the transformation applied (as
    they are, when the installed torch already has the fix)."""
    from .transform import TRANSFORM  # libcst: only here
    from fixmono.runtime.define import module_source

    return functions_from(TRANSFORM.rewrite(module_source(MODULE)).source)


def swap(functions: dict) -> dict:
    """Put `functions` (qualname -> function) in the partitioner; returns
    the ones they replaced."""
    mod = module()
    previous = {"OpTypes.is_random": mod.OpTypes.is_random, "choose_saved_values_set": mod.choose_saved_values_set}
    mod.OpTypes.is_random = functions["OpTypes.is_random"]
    mod.choose_saved_values_set = functions["choose_saved_values_set"]
    return previous


@contextlib.contextmanager
def installed(functions: dict):
    """`functions` in place of the partitioner's, for the duration."""
    previous = swap(functions)
    try:
        yield
    finally:
        swap(previous)


def random_tensor(x, op: str):
    """A random tensor shaped like x from one op of the RNG family."""
    import torch

    makers = {
        "dropout": lambda: torch.nn.functional.dropout(torch.ones_like(x), 0.5, True),
        "rand_like": lambda: (torch.rand_like(x) > 0.5).to(x.dtype),
        "randn_like": lambda: torch.randn_like(x),
        "rand": lambda: torch.rand(x.shape, device=x.device),
        "randn": lambda: torch.randn(x.shape, device=x.device),
        "bernoulli": lambda: torch.bernoulli(torch.full_like(x, 0.5)),
        "normal": lambda: torch.normal(torch.zeros_like(x), 1.0),
        "exponential": lambda: torch.empty_like(x).exponential_(),
        "uniform": lambda: torch.empty_like(x).uniform_(),
        "randint_like": lambda: torch.randint_like(x, 0, 3),
        "multinomial": lambda: torch.multinomial(torch.ones_like(x), x.numel(), replacement=True).to(x.dtype),
        "poisson": lambda: torch.poisson(torch.full_like(x, 2.0)),
        "randperm": lambda: torch.randperm(x.numel(), device=x.device).to(x.dtype),
    }
    return makers[op]()


RANDOM_OPS = ("dropout", "rand_like", "randn_like", "rand", "randn", "bernoulli", "normal", "exponential",
              "uniform", "randint_like", "multinomial", "poisson", "randperm")


def known_settings(config, **settings) -> dict:
    """The settings `config` has (torch 2.4 has no AOTAutograd cache, nor its switch: patching it
    is a KeyError there)."""
    return {name: value for name, value in settings.items() if hasattr(config, name)}


def probe(op: str, budget: float, backend: str = "aot_eager_decomp_partition", seed: int = 0,
          device: str = "cpu") -> dict:
    """Compile `y = r * x * w` (r from `op`), x = w = 1, at `budget`. The
    forward's r is y itself and d(sum y)/dx = r * w is the r the backward
    used: the gradient is right exactly where x.grad == y."""
    import torch
    import torch._functorch.config as fconfig

    def f(x, w):
        return random_tensor(x, op) * x * w

    torch.manual_seed(seed)
    # no AOTAutograd cache: a graph partitioned by the other partitioner must not come back
    with fconfig.patch(known_settings(fconfig, activation_memory_budget=budget, enable_autograd_cache=False)):
        torch._dynamo.reset()
        compiled = torch.compile(f, backend=backend, fullgraph=True)
        x = torch.ones(N, device=device, requires_grad=True)
        w = torch.ones(N, device=device, requires_grad=True)
        y = compiled(x, w)
        y.sum().backward()
    torch._dynamo.reset()
    wrong = int((x.grad != y.detach()).sum())
    return {"op": op, "budget": budget, "backend": backend, "device": device, "wrong": wrong, "total": N}
