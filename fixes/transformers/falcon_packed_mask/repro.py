"""Reproducer: Falcon attends across documents packed into one row.

    python -m fixmono.fixes.transformers.falcon_packed_mask.repro [--json]

Padding-free packing (DataCollatorWithFlattening and the like) puts documents
in one row with position ids restarting at 0 and no attention mask; the
causal mask must then be block-diagonal. A tiny random Falcon (CPU, no
cache, as the Trainer runs it) is given documents a (6 tokens) and b (5)
packed, and each alone: the packed logits of b must equal b's own.
Measured on the installed transformers, then in a fresh interpreter with the
hot-fix. Exit 1 reproduced, 0 not reproduced, 77 skipped.
"""
from __future__ import annotations

import sys

from fixmono.model.fix import ReproResult, Verdict
from fixmono.runtime.repro import MeasureFailed, cli, measured_apart

FIX_ID = "transformers-falcon-packed-mask"
SAME = 1e-5


def measure() -> dict:
    import torch
    import transformers
    from transformers import FalconConfig, FalconForCausalLM

    torch.manual_seed(0)
    model = FalconForCausalLM(FalconConfig(vocab_size=100, hidden_size=64, num_hidden_layers=2, num_attention_heads=4,
                                           new_decoder_architecture=False, alibi=False)).eval()
    a, b = torch.randint(0, 100, (1, 6)), torch.randint(0, 100, (1, 5))
    positions = torch.cat([torch.arange(6), torch.arange(5)])[None]
    with torch.no_grad():
        packed = model(torch.cat([a, b], 1), position_ids=positions, use_cache=False).logits
        alone_a, alone_b = model(a, use_cache=False).logits, model(b, use_cache=False).logits
    return {"transformers": transformers.__version__, "doc_a": float((packed[:, :6] - alone_a).abs().max()),
            "doc_b": float((packed[:, 6:] - alone_b).abs().max())}


def reproduce() -> ReproResult:
    try:
        before = measured_apart(f"{__package__}.repro")
        after = measured_apart(f"{__package__}.repro", FIX_ID)
    except MeasureFailed as err:
        return ReproResult(Verdict.SKIPPED, f"needs torch and transformers (CPU): {err}")
    label = f"transformers {before['transformers']}"
    details = {"unpatched": before, "patched": after}
    if before["doc_a"] > SAME:
        return ReproResult(Verdict.SKIPPED, f"{label}: the first document differs packed and alone "
                                            f"({before['doc_a']:.2g}): the comparison is not sound here", details)
    if before["doc_b"] <= SAME:
        return ReproResult(Verdict.NOT_REPRODUCED, f"{label}: the packed second document equals it alone "
                                                   f"({before['doc_b']:.0e})", details)
    fixed = f"with the hot-fix {after['doc_b']:.0e}" if after["doc_b"] <= SAME else \
        f"with the hot-fix still {after['doc_b']:.3g} ({after['hotfix']})"
    return ReproResult(Verdict.REPRODUCED, f"{label}: the second packed document attends to the first: max |logits "
                                           f"packed - alone| {before['doc_b']:.3g} (first document "
                                           f"{before['doc_a']:.0e}); {fixed}", details)


def main(argv: list[str] | None = None) -> int:
    return cli(reproduce, __doc__, argv, measure=measure)


if __name__ == "__main__":
    sys.exit(main())
