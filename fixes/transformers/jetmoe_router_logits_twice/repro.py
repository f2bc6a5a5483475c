"""Reproducer: JetMoE counts each attention router twice in its aux loss.

    python -m fixmono.fixes.transformers.jetmoe_router_logits_twice.repro [--json]

A tiny random JetMoE (2 layers, 4 experts, top 2, CPU) whose attention (MoA)
routers are made strongly imbalanced, so that counting them twice shows in
the load-balancing loss. Compared: how many router-logit tensors the model
returns against the number of routers, and its aux_loss against the same
loss computed (load_balancing_loss_func) over one tensor per router, caught
by forward hooks. Measured on the installed transformers, then in a fresh
interpreter with the hot-fix. Exit 1 reproduced, 0 not reproduced, 77 skipped.
"""
from __future__ import annotations

import sys

from fixmono.model.fix import ReproResult, Verdict
from fixmono.runtime.repro import MeasureFailed, cli, measured_apart

FIX_ID = "transformers-jetmoe-router-logits-twice"
SAME = 1e-6


def measure() -> dict:
    import torch
    import transformers
    from transformers import JetMoeConfig, JetMoeForCausalLM
    from transformers.models.jetmoe.modeling_jetmoe import JetMoeTopKGating, load_balancing_loss_func

    torch.manual_seed(0)
    config = JetMoeConfig(vocab_size=100, hidden_size=64, num_hidden_layers=2, kv_channels=16, intermediate_size=64,
                          num_local_experts=4, num_experts_per_tok=2, num_key_value_heads=2,
                          output_router_logits=True, pad_token_id=0)
    model = JetMoeForCausalLM(config).eval()
    routers = [m for m in model.modules() if isinstance(m, JetMoeTopKGating)]
    with torch.no_grad():  # every attention router prefers expert 0
        for layer in model.model.layers:
            layer.self_attention.experts.router.layer.weight.zero_()
            layer.self_attention.experts.router.layer.weight[0] += 1.0
    caught = []
    hooks = [r.register_forward_hook(lambda module, args, out: caught.append(out[4])) for r in routers]
    with torch.no_grad():
        out = model(torch.randint(0, 100, (2, 9), generator=torch.Generator().manual_seed(1)), output_router_logits=True)
    for hook in hooks:
        hook.remove()
    reference = load_balancing_loss_func(tuple(caught), config.num_local_experts, config.num_experts_per_tok, None)
    return {"transformers": transformers.__version__, "routers": len(routers),
            "router_logits": len(out.router_logits), "aux_loss": float(out.aux_loss),
            "reference": float(reference)}


def reproduce() -> ReproResult:
    try:
        before = measured_apart(f"{__package__}.repro")
        after = measured_apart(f"{__package__}.repro", FIX_ID)
    except MeasureFailed as err:
        return ReproResult(Verdict.SKIPPED, f"needs torch and a transformers with JetMoE (CPU): {err}")
    label = f"transformers {before['transformers']}"
    details = {"unpatched": before, "patched": after}
    right = lambda side: side["router_logits"] == side["routers"] and \
        abs(side["aux_loss"] - side["reference"]) <= SAME  # noqa: E731
    if right(before):
        return ReproResult(Verdict.NOT_REPRODUCED, f"{label}: {before['router_logits']} router-logit tensors for "
                                                   f"{before['routers']} routers, aux loss as computed per router",
                           details)
    fixed = f"with the hot-fix {after['router_logits']} and {after['aux_loss']:.6f}" if right(after) else \
        f"with the hot-fix still {after['router_logits']}, {after['aux_loss']:.6f} ({after['hotfix']})"
    return ReproResult(Verdict.REPRODUCED, f"{label}: {before['router_logits']} router-logit tensors for "
                                           f"{before['routers']} routers, aux_loss {before['aux_loss']:.6f} where one "
                                           f"per router gives {before['reference']:.6f}; {fixed}", details)


def main(argv: list[str] | None = None) -> int:
    return cli(reproduce, __doc__, argv, measure=measure)


if __name__ == "__main__":
    sys.exit(main())
