"""transformers MoE routers: `router_logits` returned as probabilities, so the
auxiliary loss applies softmax twice (huggingface/transformers#45120, fixed by
#45131 in 5.6.0).

Declaration only: transform.py, routers.py (the routers run for real),
repro.py, hotfix.py, validate.py.
"""
from fixmono.model.fix import Case, Dep3, FileChange, Fix, Fixture, HotFix, lazy

from . import hotfix
from .routers import FAMILIES
from .transform import TRANSFORM

MIXTRAL = "src/transformers/models/mixtral/modeling_mixtral.py"
OMNI = "src/transformers/models/qwen3_omni_moe/modeling_qwen3_omni_moe.py"

_ROUTER = '''class {name}TopKRouter(nn.Module):
    def forward(self, hidden_states):
        hidden_states = hidden_states.reshape(-1, self.hidden_dim)
        router_logits = F.linear(hidden_states, self.weight)
{scores}        router_top_value, router_indices = torch.topk({topk}, self.top_k, dim=-1)
        router_top_value = router_top_value.to(router_logits.dtype)
        return router_logits, router_top_value, router_indices
'''
_SOFTMAX = "        {target} = torch.nn.functional.softmax({arg}, dtype=torch.float, dim=-1)\n"


def _router(name="Tiny", target="router_logits", arg="router_logits", topk="router_logits", scores=None) -> str:
    return _ROUTER.format(name=name, topk=topk,
                          scores=_SOFTMAX.format(target=target, arg=arg) if scores is None else scores)


_FIXED = dict(target="router_probs", topk="router_probs")

CASES = (
    Case("qwen-style router (5.0-5.5)", path=MIXTRAL, before=_router(), after=_router(**_FIXED)),
    Case("mixtral-style .float() argument", path=MIXTRAL, before=_router(arg="router_logits.float()"),
         after=_router(arg="router_logits.float()", **_FIXED)),
    Case("three routers in one file (omni)", path=OMNI, before="\n\n".join(_router(n) for n in "ABC"),
         after="\n\n".join(_router(n, **_FIXED) for n in "ABC")),
    Case("omni file with one router left unfixed", path=OMNI,
         before="\n\n".join(_router(n, **(_FIXED if n != "B" else {})) for n in "ABC"),
         after="\n\n".join(_router(n, **_FIXED) for n in "ABC")),
    Case("already fixed (5.6+)", expect="already-applied", path=MIXTRAL, before=_router(**_FIXED)),
    Case("4.x: the gate is a linear layer, softmax into routing_weights", expect="not-applicable", path=MIXTRAL,
         before='''class TinySparseMoeBlock(nn.Module):
    def forward(self, hidden_states):
        router_logits = self.gate(hidden_states)
        routing_weights = F.softmax(router_logits, dim=1, dtype=torch.float)
        routing_weights, selected_experts = torch.topk(routing_weights, self.top_k, dim=-1)
        return hidden_states, router_logits
'''),
    Case("sigmoid router: no softmax of the logits", expect="not-applicable", path=MIXTRAL,
         before=_router(scores="        router_logits = router_logits.sigmoid()\n")),
    Case("softmax of the logits but no topk of them", expect="failed", path=MIXTRAL,
         before=_router(topk="router_scores_in")),
    Case("router_probs already means something else", expect="failed", path=MIXTRAL,
         before=_router(scores="        router_probs = None\n" + _SOFTMAX.format(target="router_logits",
                                                                                   arg="router_logits"))),
)


def _change(family) -> FileChange:
    fixture = {"float": "fixtures/router_float.py", "omni": "fixtures/omni_routers.py"}.get(family.style,
                                                                                            "fixtures/router.py")
    return FileChange(family.path, TRANSFORM, sites=len(family.routers), optional=family.optional,
                      fixture=Fixture(fixture, mutate=tuple(f"{r}.forward" for r in family.fixture_routers),
                                      edit="replace"))


FIX = Fix(
    id="transformers-moe-router-double-softmax",
    title="MoE routers: return raw router logits, so the auxiliary loss applies softmax once",
    upstream="transformers",
    description="""\
From transformers 5.0.0 to 5.5.4 the top-k router of ten MoE families
(mixtral, minimax, qwen2_moe, qwen3_moe, qwen3_vl_moe, qwen3_next,
qwen3_omni_moe, qwen3_5_moe, olmoe, flex_olmo) overwrites its logits with
their softmax and returns that as router_logits. The model records it for
output_router_logits, and load_balancing_loss_func applies softmax again: the
auxiliary loss is computed on softmax(softmax(logits)), which is nearly
uniform, so its gradient barely pushes the router towards balance. Keep the
softmax in router_probs for the top-k and return the raw logits, as
transformers 5.6.0 does.""",
    dep3=Dep3(
        origin="upstream, https://github.com/huggingface/transformers/pull/45131",
        bug="https://github.com/huggingface/transformers/issues/45120",
        forwarded="not-needed",
        applied_upstream="https://github.com/huggingface/transformers/pull/45131",
        last_update="2026-11-24",
    ),
    backends=("cuda", "rocm", "cpu"),
    changes=tuple(_change(family) for family in FAMILIES),
    references=("https://github.com/huggingface/transformers/issues/45120",
                "https://github.com/huggingface/transformers/pull/45131",
                "https://github.com/ByteDance-Seed/VeOmni/pull/715"),
    cases=CASES,
    hotfix=HotFix(apply=hotfix.enable, remove=hotfix.disable, trigger="transformers"),
    reproduce=lazy(f"{__package__}.repro:reproduce"),
    repro_needs="cpu",
    validate=lazy(f"{__package__}.validate:check"),
)
