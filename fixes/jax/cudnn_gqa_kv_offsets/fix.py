"""JAX cuDNN packed attention: kv offsets scaled by the query heads (GQA/MQA).

Declaration only: transform.py, offsets.py (the function run for real),
repro.py, hotfix.py, validate.py.
"""
from fixmono.model.fix import Case, Dep3, FileChange, Fix, Fixture, HotFix, lazy

from . import hotfix
from .transform import TRANSFORM
from .validate import TARGET

_FUNCTION = '''def _fix_seqlen_offsets(q_seqlen, kv_seqlen, q_offsets, kv_offsets, query, key):
  if get_max_seg_per_batch(q_offsets) > 1:
    B, T, N, H = query.shape
    _, S, {kv}, _ = key.shape
    q_offsets = q_offsets * N * H
    kv_offsets = kv_offsets * {scale} * H
  return q_seqlen, kv_seqlen, q_offsets, kv_offsets
'''

CASES = (
    Case("kv offsets scaled by the query heads", before=_FUNCTION.format(kv="_", scale="N"),
         after=_FUNCTION.format(kv="K", scale="K")),
    Case("already by the key's heads (jax-ml/jax#39521)", expect="already-applied",
         before=_FUNCTION.format(kv="K", scale="K")),
    Case("already, as jax 0.11.2 has it (N_kv)", expect="already-applied",
         before=_FUNCTION.format(kv="N_kv", scale="N_kv")),
    Case("the key's head count bound but not used", before=_FUNCTION.format(kv="K", scale="N"),
         after=_FUNCTION.format(kv="K", scale="K")),
    Case("no _fix_seqlen_offsets (jax before packed attention)", expect="not-applicable",
         before="def _dot_product_attention_fwd_impl(query, key):\n  return query\n"),
    Case("kv offsets scaled by something else", expect="failed",
         before=_FUNCTION.format(kv="_", scale="stride")),
    Case("K already means something in the function", expect="failed",
         before=_FUNCTION.format(kv="_", scale="N").replace("B, T, N, H", "K = 1\n    B, T, N, H")),
)

FIX = Fix(
    id="jax-cudnn-gqa-kv-offsets",
    title="cuDNN attention: scale packed kv offsets by the key's head count (GQA/MQA)",
    upstream="jax",
    description="""\
dot_product_attention's cuDNN path with packed sequences (q_offsets /
kv_offsets) turns the per-batch token offsets into element offsets in
_fix_seqlen_offsets, multiplying both by the query's head count. With grouped
or multi-query attention the key and value have fewer heads, so every kv
segment after the first starts at the wrong element: cuDNN attends over the
wrong keys and values, or reads past them (outputs off by 1e28 in the report),
silently. Multiply the kv offsets by the key's head count.""",
    dep3=Dep3(
        origin="upstream, https://github.com/jax-ml/jax/pull/39521",
        forwarded="not-needed",
        applied_upstream="https://github.com/jax-ml/jax/pull/39521",
        last_update="2026-11-23",
    ),
    backends=("cuda",),
    changes=(FileChange(TARGET, TRANSFORM, sites=1,
                        fixture=Fixture("fixtures/fused_attention_stablehlo.py", mutate=("_fix_seqlen_offsets",),
                                        edit="replace")),),
    references=("https://github.com/jax-ml/jax/pull/39521",),
    cases=CASES,
    hotfix=HotFix(apply=hotfix.enable, remove=hotfix.disable, trigger="jax._src.cudnn.fused_attention_stablehlo"),
    reproduce=lazy(f"{__package__}.repro:reproduce"),
    repro_needs="cpu",
    validate=lazy(f"{__package__}.validate:check"),
)
