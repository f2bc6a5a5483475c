"""Reproducer: the gradient of vmap(dynamic_slice) is zero at clamped indices.

    python -m fixmono.fixes.jax.vmap_dynamic_slice_grad.repro [--json]

`lax.dynamic_index_in_dim(x, i)` clamps an out-of-range start index into
range, and the forward value says so: x = [1, 2, 3] at i = [5, 1, -7] under
vmap gives [3, 2, 1]. Its batching rule made a gather that promised in-bounds
indices, so the gradient (a scatter) drops the clamped ones: grad of the sum
is [0, 1, 0] where each element was read once ([1, 1, 1]). Measured on the
installed jax (CPU), then in a fresh interpreter with the hot-fix (the
batching rule is registered when jax is imported: the fix replaces its code
in place). Exit 1 reproduced, 0 not reproduced, 77 skipped.
"""
from __future__ import annotations

import sys

from fixmono.model.fix import ReproResult, Verdict
from fixmono.runtime.repro import MeasureFailed, cli, measured_apart

FIX_ID = "jax-vmap-dynamic-slice-grad"
RIGHT = [1.0, 1.0, 1.0]


def measure() -> dict:
    import jax
    import jax.numpy as jnp
    from jax import lax

    jax.config.update("jax_platforms", "cpu")
    x, index = jnp.array([1.0, 2.0, 3.0]), jnp.array([5, 1, -7])
    pick = jax.vmap(lambda x, i: lax.dynamic_index_in_dim(x, i, 0, keepdims=False), (None, 0))
    grad = jax.grad(lambda x: pick(x, index).sum())(x)
    return {"jax": jax.__version__, "value": pick(x, index).tolist(), "grad": grad.tolist()}


def reproduce() -> ReproResult:
    try:
        before = measured_apart(f"{__package__}.repro")
        after = measured_apart(f"{__package__}.repro", FIX_ID)
    except MeasureFailed as err:
        return ReproResult(Verdict.SKIPPED, f"needs jax (CPU): {err}")
    label = f"jax {before['jax']}"
    details = {"unpatched": before, "patched": after}
    if before["grad"] == RIGHT:
        return ReproResult(Verdict.NOT_REPRODUCED, f"{label}: grad of vmap(dynamic_index_in_dim) at clamped "
                                                   f"indices is {before['grad']} (right)", details)
    if after["grad"] != RIGHT:
        return ReproResult(Verdict.REPRODUCED, f"{label}: grad {before['grad']} (want {RIGHT}), and with the "
                                               f"hot-fix still {after['grad']} ({after['hotfix']})", details)
    return ReproResult(Verdict.REPRODUCED, f"{label}: value {before['value']} but grad {before['grad']} (want "
                                           f"{RIGHT}: the clamped indices get none); with the hot-fix "
                                           f"{after['grad']}", details)


def main(argv: list[str] | None = None) -> int:
    return cli(reproduce, __doc__, argv, measure=measure)


if __name__ == "__main__":
    sys.exit(main())
