"""PyTorch SDPA: memory-efficient backward when only attn_mask requires grad
(pytorch/pytorch#148476).

Declaration only: transform.py, validate.py, repro.py (CUDA), hotfix.py.
"""
from fixmono.model.fix import Case, Dep3, FileChange, Fix, Fixture, HotFix, lazy

from . import hotfix
from .transform import TRANSFORM
from .validate import TARGET

_DISPATCH = '''Tensor scaled_dot_product_attention(const Tensor& query_, const Tensor& key, const Tensor& value,
    const std::optional<Tensor>& {mask}, double dropout_p, bool is_causal) {{
  auto attn_mask = convert_attn_func({mask}, query_.dtype());
  switch (backend) {{
    case {prefix}SDPBackend::cudnn_attention: {{
      bool compute_logsumexp = should_compute_logsumexp(query_, key, value);
      return run_cudnn(query_, key, value, attn_mask, compute_logsumexp);
    }}
    case {prefix}SDPBackend::efficient_attention: {{
      bool compute_logsumexp = {decision};{extra}
      return run_efficient(query_, key, value, attn_mask, compute_logsumexp);
    }}
    default:
      return Tensor();
  }}
}}
'''
_CALL = "should_compute_logsumexp(query_, key, value)"


def _dispatch(mask="attn_mask_", prefix="", decision=_CALL, extra="") -> str:
    return _DISPATCH.format(mask=mask, prefix=prefix, decision=decision, extra=extra)


def _fixed(mask="attn_mask_") -> str:
    return f"{_CALL} || (at::GradMode::is_enabled() && {mask}.has_value() && {mask}->requires_grad())"


CASES = (
    Case("efficient case ignores the mask", before=_dispatch(), after=_dispatch(decision=_fixed())),
    Case("older layout: sdp::SDPBackend, mask parameter named differently",
         before=_dispatch(mask="mask_in", prefix="sdp::"), after=_dispatch(mask="mask_in", prefix="sdp::",
                                                                          decision=_fixed("mask_in"))),
    Case("already: a later statement ORs the mask in (as upstream's overrideable case does)",
         expect="already-applied",
         before=_dispatch(extra="\n      compute_logsumexp = compute_logsumexp ||\n"
                                "          (at::GradMode::is_enabled() && attn_mask.has_value() && "
                                "attn_mask.value().requires_grad());")),
    Case("already fixed by this transformation", expect="already-applied", before=_dispatch(decision=_fixed())),
    Case("upstream's fix (#188302): a helper that also takes the mask", expect="already-applied",
         before=_dispatch(decision="should_compute_logsumexp_with_attn_mask(query_, key, value, attn_mask)")),
    Case("no dispatcher calling the helper (older torch)", expect="not-applicable",
         before="Tensor scaled_dot_product_attention(const Tensor& q) {\n  return q;\n}\n"),
    Case("helper called twice in the efficient case", expect="failed",
         before=_dispatch(extra="\n      bool again = should_compute_logsumexp(query_, key, value);")),
)

FIX = Fix(
    id="pytorch-sdpa-mask-grad-logsumexp",
    title="SDPA: compute logsumexp for the memory-efficient kernel when only attn_mask requires grad",
    upstream="pytorch",
    description="""\
scaled_dot_product_attention asks the memory-efficient kernel for its
logsumexp only when query, key or value requires grad. With a float mask
that requires grad (a learned bias) and inputs that do not, the dispatcher
still picks that kernel (flash takes no mask, cuDNN no mask that requires
grad), the forward returns an empty logsumexp, and the backward reads it: on
CUDA "LSE is not correctly aligned (strideH)", or with one head an illegal
memory access. Ask for the logsumexp when the mask requires grad too, as the
overrideable case already does.""",
    dep3=Dep3(
        origin="other",
        bug="https://github.com/pytorch/pytorch/issues/148476",
        forwarded="no",
        last_update="2026-11-23",
    ),
    backends=("cuda",),
    changes=(FileChange(TARGET, TRANSFORM, sites=1,
                        fixture=Fixture("fixtures/attention.cpp", mutate=("scaled_dot_product_attention",),
                                        edit="replace")),),
    references=("https://github.com/pytorch/pytorch/issues/148476",
                "https://github.com/pytorch/pytorch/pull/188302"),
    cases=CASES,
    hotfix=HotFix(apply=hotfix.enable, remove=hotfix.disable, trigger="torch"),
    reproduce=lazy(f"{__package__}.repro:reproduce"),
    repro_needs="cuda",
    validate=lazy(f"{__package__}.validate:check"),
)
