"""Reproducer: dot_product_attention ignores local_window_size when no mask is given.

    python -m fixmono.fixes.jax.local_window_ignored.repro [--json]

`jax.nn.dot_product_attention(q, k, v, local_window_size=(1, 1))` (the XLA
implementation, the default on CPU) with no mask, not causal and no sequence
lengths: `_apply_masks` returned the logits before looking at the window, so
every query attends to every key. Compared with the same call given the band
mask |i - j| <= 1 explicitly (what the window means) and with plain full
attention. Measured on the installed jax (CPU), then in a fresh interpreter
with the hot-fix. Exit 1 reproduced, 0 not reproduced, 77 skipped.
"""
from __future__ import annotations

import sys

from fixmono.model.fix import ReproResult, Verdict
from fixmono.runtime.repro import MeasureFailed, cli, measured_apart

FIX_ID = "jax-local-window-ignored"
SAME = 1e-5  # float32, the same computation masked two ways


def measure() -> dict:
    import jax
    import jax.numpy as jnp

    jax.config.update("jax_platforms", "cpu")
    q, k, v = jax.random.normal(jax.random.PRNGKey(0), (3, 1, 8, 2, 16))  # B1 T8 N2 H16
    rows, cols = jnp.arange(8)[:, None], jnp.arange(8)[None, :]
    band = (jnp.abs(rows - cols) <= 1)[None, None]
    windowed = jax.nn.dot_product_attention(q, k, v, local_window_size=(1, 1))
    banded = jax.nn.dot_product_attention(q, k, v, mask=band)
    full = jax.nn.dot_product_attention(q, k, v)
    return {"jax": jax.__version__, "vs_band": float(jnp.abs(windowed - banded).max()),
            "vs_full": float(jnp.abs(windowed - full).max())}


def reproduce() -> ReproResult:
    try:
        before = measured_apart(f"{__package__}.repro")
        after = measured_apart(f"{__package__}.repro", FIX_ID)
    except MeasureFailed as err:
        return ReproResult(Verdict.SKIPPED, f"needs jax (CPU): {err}")
    label = f"jax {before['jax']}"
    details = {"unpatched": before, "patched": after}
    if before["vs_band"] <= SAME:
        return ReproResult(Verdict.NOT_REPRODUCED, f"{label}: local_window_size=(1, 1) equals the band mask "
                                                   f"({before['vs_band']:.0e})", details)
    if after["vs_band"] > SAME:
        return ReproResult(Verdict.REPRODUCED, f"{label}: the window is ignored (max |windowed - banded| "
                                               f"{before['vs_band']:.3g}), and with the hot-fix still "
                                               f"{after['vs_band']:.3g} ({after['hotfix']})", details)
    return ReproResult(Verdict.REPRODUCED, f"{label}: local_window_size=(1, 1) gives full attention (max |windowed "
                                           f"- full| {before['vs_full']:.0e}, - banded {before['vs_band']:.3g}); "
                                           f"with the hot-fix - banded {after['vs_band']:.0e}", details)


def main(argv: list[str] | None = None) -> int:
    return cli(reproduce, __doc__, argv, measure=measure)


if __name__ == "__main__":
    sys.exit(main())
