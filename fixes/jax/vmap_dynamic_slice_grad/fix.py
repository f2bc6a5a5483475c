"""jax: grad of vmap(dynamic_slice) drops clamped out-of-range indices
(jax-ml/jax#34228, fixed by #34229, in jax 0.9.0).

Imported by `fixmono import` from the upstream commit (its jax/_src part):
fix.patch is the fix, ported by syntax to each release; fixture, cases and
check are made from the diff (fixmono.engines.imported). Written by hand:
repro.py and the fields below.
"""
from fixmono.engines.imported import declare
from fixmono.model.fix import Dep3, lazy

FIX = declare(__file__, id="jax-vmap-dynamic-slice-grad", upstream="jax",
              dep3=Dep3(origin="upstream, https://github.com/jax-ml/jax/commit/0b4a4407b775e12401a1d700b703ee13762b4be0",
                        bug="https://github.com/jax-ml/jax/issues/34228",
                        forwarded="not-needed",
                        applied_upstream="https://github.com/jax-ml/jax/pull/34229 (jax 0.9.0)",
                        last_update="2026-01-08"),
              backends=("cuda", "rocm", "cpu"),
              references=("https://github.com/jax-ml/jax/issues/34228", "https://github.com/jax-ml/jax/pull/34229"),
              reproduce=lazy(f"{__package__}.repro:reproduce"), repro_needs="cpu")
