"""transformers batched_mm experts: router gradient from EP sentinel slots
(huggingface/transformers#48687, fixed by #48689 in 5.18.0).

Declaration only: transform.py, experts.py (the function run for real),
repro.py, hotfix.py, validate.py.
"""
from fixmono.model.fix import Case, Dep3, FileChange, Fix, Fixture, HotFix, lazy

from . import hotfix
from .experts import TARGET
from .transform import TRANSFORM, WHY

_FUNCTION = '''def batched_mm_experts_forward(self, hidden_states, top_k_index, top_k_weights):
    sample_weights = top_k_weights.reshape(-1)
    expert_ids = top_k_index.reshape(-1)
{before_clamp}    {clamp}
    proj_out = run(self, hidden_states, expert_ids)
{before_product}    weighted_out = proj_out * sample_weights.unsqueeze(-1)
{after_product}    return weighted_out.sum(dim=1)
'''
_MASK = f"    {WHY}\n    sentinel_mask = expert_ids >= self.num_experts\n"
_FILL = f"    {WHY}\n    sample_weights = sample_weights.masked_fill(sentinel_mask, 0.0)\n"
_CLAMP = "expert_ids = expert_ids.clamp(0, self.num_experts - 1)"


def _source(before_clamp="", clamp=_CLAMP, before_product="", after_product="") -> str:
    return _FUNCTION.format(before_clamp=before_clamp, clamp=clamp, before_product=before_product,
                            after_product=after_product)


CASES = (
    Case("sentinel ids clamped, weights not masked (5.10-5.17)", path=TARGET, before=_source(),
         after=_source(before_clamp=_MASK, before_product=_FILL)),
    Case("in-place clamp_ (5.8, 5.9)", path=TARGET, before=_source(clamp="expert_ids.clamp_(0, self.num_experts - 1)"),
         after=_source(before_clamp=_MASK, clamp="expert_ids.clamp_(0, self.num_experts - 1)",
                       before_product=_FILL)),
    Case("already masked (5.18+)", expect="already-applied", path=TARGET,
         before=_source(before_clamp="    sentinel_mask = expert_ids >= self.num_experts\n",
                        before_product="    sample_weights = sample_weights.masked_fill(sentinel_mask, 0.0)\n")),
    Case("output masked after the multiply (5.3-5.7)", expect="already-applied", path=TARGET,
         before=_source(before_clamp="    invalid_mask = expert_ids >= self.num_experts\n",
                        after_product="    weighted_out.masked_fill_(invalid_mask.unsqueeze(-1), 0.0)\n")),
    Case("output multiplied by a validity mask (5.1, 5.2)", expect="already-applied", path=TARGET,
         before=_source(before_clamp="    valid_mask = expert_ids < self.num_experts\n",
                        after_product="    weighted_out = weighted_out * valid_mask.unsqueeze(-1)\n")),
    Case("no clamp: sentinels not handled (5.0)", expect="not-applicable", path=TARGET,
         before=_source(clamp="pass")),
    Case("sentinel_mask already means something else", expect="failed", path=TARGET,
         before=_source(before_clamp="    sentinel_mask = None\n")),
    Case("routing weights applied twice", expect="failed", path=TARGET,
         before=_source(after_product="    weighted_out = weighted_out * sample_weights.unsqueeze(-1)\n")),
)

FIX = Fix(
    id="transformers-moe-sentinel-router-grad",
    title="batched_mm experts: keep expert-parallel sentinel slots out of the router gradient",
    upstream="transformers",
    description="""\
Under expert parallelism, token slots routed to another rank's experts reach
batched_mm_experts_forward with a sentinel expert id and a routing weight of
zero. The function clamps the id to the last local expert so the weight
gather stays in bounds, and relies on the zero weight to drop the slot. The
output is right, but the gradient of the routing weight at that slot is the
clamped expert's output: the router is trained on experts the token never
went to, silently. Mask the routing weights at sentinel slots before they
multiply the expert outputs, as transformers 5.18 does.""",
    dep3=Dep3(
        origin="upstream, https://github.com/huggingface/transformers/pull/48689",
        bug="https://github.com/huggingface/transformers/issues/48687",
        forwarded="not-needed",
        applied_upstream="https://github.com/huggingface/transformers/pull/48689",
        last_update="2026-11-23",
    ),
    backends=("cuda", "rocm", "cpu"),
    changes=(FileChange(TARGET, TRANSFORM, sites=1,
                        fixture=Fixture("fixtures/moe.py", mutate=("batched_mm_experts_forward",), edit="insert")),),
    references=("https://github.com/huggingface/transformers/issues/48687",
                "https://github.com/huggingface/transformers/pull/48689",
                "https://github.com/huggingface/transformers/pull/48205"),
    cases=CASES,
    hotfix=HotFix(apply=hotfix.enable, remove=hotfix.disable, trigger="transformers.integrations.moe"),
    reproduce=lazy(f"{__package__}.repro:reproduce"),
    repro_needs="cpu",
    validate=lazy(f"{__package__}.validate:check"),
)
