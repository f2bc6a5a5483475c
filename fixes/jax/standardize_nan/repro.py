"""Reproducer: jax.nn.standardize returns NaN where the variance is tiny next to the mean.

    python -m fixmono.fixes.jax.standardize_nan.repro [--json]

`standardize` computes the variance in one pass, mean(x^2) - mean(x)^2; in
float32, rows of values 300 + 1e-3 * noise come out slightly negative, and
rsqrt(variance + 1e-5) of a number below zero is NaN. Counted: NaN outputs of
standardize over such a 1000 x 64 array (axis -1, default epsilon). Measured
on the installed jax (CPU), then in a fresh interpreter with the hot-fix.
Exit 1 reproduced, 0 not reproduced, 77 skipped.
"""
from __future__ import annotations

import sys

from fixmono.model.fix import ReproResult, Verdict
from fixmono.runtime.repro import MeasureFailed, cli, measured_apart

FIX_ID = "jax-standardize-nan"


def measure() -> dict:
    import jax
    import jax.numpy as jnp

    jax.config.update("jax_platforms", "cpu")
    x = 300.0 + 1e-3 * jax.random.normal(jax.random.PRNGKey(0), (1000, 64), dtype=jnp.float32)
    out = jax.nn.standardize(x, axis=-1)
    variance = jnp.mean(jnp.square(x), -1) - jnp.square(jnp.mean(x, -1))
    return {"jax": jax.__version__, "nan": int(jnp.isnan(out).sum()), "size": int(out.size),
            "negative_variances": int((variance < 0).sum())}


def reproduce() -> ReproResult:
    try:
        before = measured_apart(f"{__package__}.repro")
        after = measured_apart(f"{__package__}.repro", FIX_ID)
    except MeasureFailed as err:
        return ReproResult(Verdict.SKIPPED, f"needs jax (CPU): {err}")
    label = f"jax {before['jax']}"
    details = {"unpatched": before, "patched": after}
    if before["negative_variances"] == 0:
        return ReproResult(Verdict.SKIPPED, f"{label}: no one-pass variance came out negative here: the input "
                                            "does not exercise the bug", details)
    if before["nan"] == 0:
        return ReproResult(Verdict.NOT_REPRODUCED, f"{label}: no NaN from standardize although "
                                                   f"{before['negative_variances']} one-pass variances are "
                                                   "negative", details)
    fixed = "still" if after["nan"] else "none with the hot-fix"
    return ReproResult(Verdict.REPRODUCED, f"{label}: {before['nan']} of {before['size']} outputs of standardize "
                                           f"are NaN ({before['negative_variances']} rows with a negative one-pass "
                                           f"variance); {fixed}" + (f" {after['nan']} ({after['hotfix']})"
                                                                    if after["nan"] else ""), details)


def main(argv: list[str] | None = None) -> int:
    return cli(reproduce, __doc__, argv, measure=measure)


if __name__ == "__main__":
    sys.exit(main())
