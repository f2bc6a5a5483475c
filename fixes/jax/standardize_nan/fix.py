"""jax: jax.nn.standardize returns NaN where the one-pass variance is negative
(jax-ml/jax#30426, fixed in jax 0.8.2).

Imported by `fixmono import` from the upstream commit (its jax/_src part):
fix.patch is the fix, ported by syntax to each release; fixture, cases and
check are made from the diff (fixmono.engines.imported). Written by hand:
repro.py and the fields below.
"""
from fixmono.engines.imported import declare
from fixmono.model.fix import Dep3, lazy

FIX = declare(__file__, id="jax-standardize-nan", upstream="jax",
              # jax 0.10.1 rewrote standardize (an `algorithm=` argument): the clip sits in its "fast" branch
              fixed_when={"jax/_src/nn/functions.py": ("standardize", ("variance = jnp.clip(variance, 0)",))},
              dep3=Dep3(origin="upstream, https://github.com/jax-ml/jax/commit/c13c96b656347c6221a13ba691ba69d2f9254278",
                        bug="https://github.com/jax-ml/jax/issues/30426",
                        forwarded="not-needed",
                        applied_upstream="https://github.com/jax-ml/jax/commit/c13c96b656347c6221a13ba691ba69d2f9254278 (jax 0.8.2)",
                        last_update="2025-12-01"),
              backends=("cuda", "rocm", "cpu"),
              references=("https://github.com/jax-ml/jax/issues/30426",),
              reproduce=lazy(f"{__package__}.repro:reproduce"), repro_needs="cpu")
