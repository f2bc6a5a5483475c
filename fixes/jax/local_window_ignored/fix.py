"""jax: dot_product_attention ignores local_window_size when no mask is given
(jax-ml/jax#32357, in jax 0.8.2).

Imported by `fixmono import` from the upstream commit (its jax/_src part):
fix.patch is the fix, ported by syntax to each release; fixture, cases and
check are made from the diff (fixmono.engines.imported). Written by hand:
repro.py and the fields below.
"""
from fixmono.engines.imported import declare
from fixmono.model.fix import Dep3, lazy

FIX = declare(__file__, id="jax-local-window-ignored", upstream="jax",
              dep3=Dep3(origin="upstream, https://github.com/jax-ml/jax/commit/099f0a170820c182495da50705017b11ff46d989",
                        forwarded="not-needed",
                        applied_upstream="https://github.com/jax-ml/jax/pull/32357 (jax 0.8.2)",
                        last_update="2025-10-05"),
              backends=("cuda", "rocm", "cpu"),
              references=("https://github.com/jax-ml/jax/pull/32357",),
              reproduce=lazy(f"{__package__}.repro:reproduce"), repro_needs="cpu")
