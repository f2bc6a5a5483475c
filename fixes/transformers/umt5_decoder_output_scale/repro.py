"""Reproducer: UMT5 scales its decoder output although the checkpoint does not tie embeddings.

    python -m fixmono.fixes.transformers.umt5_decoder_output_scale.repro [--json]

A tiny random UMT5ForConditionalGeneration (CPU) configured as the
google/umt5 checkpoints are (tie_word_embeddings false): its logits must be
lm_head of the last decoder hidden state, unscaled. Compared: the mean ratio
of the model's logits to that, and the loss against the loss of the unscaled
logits. Measured on the installed transformers, then in a fresh interpreter
with the hot-fix. Exit 1 reproduced, 0 not reproduced, 77 skipped.
"""
from __future__ import annotations

import sys

from fixmono.model.fix import ReproResult, Verdict
from fixmono.runtime.repro import MeasureFailed, cli, measured_apart

FIX_ID = "transformers-umt5-decoder-output-scale"


def measure() -> dict:
    import torch
    import transformers
    from transformers import UMT5Config, UMT5ForConditionalGeneration

    torch.manual_seed(0)
    model = UMT5ForConditionalGeneration(UMT5Config(vocab_size=64, d_model=64, d_kv=16, d_ff=64, num_layers=2,
                                                    num_heads=4, tie_word_embeddings=False)).eval()
    ids, labels = torch.randint(2, 64, (2, 7)), torch.randint(2, 64, (2, 5))
    with torch.no_grad():
        out = model(input_ids=ids, labels=labels, output_hidden_states=True)
        unscaled = model.lm_head(out.decoder_hidden_states[-1])
        loss = torch.nn.functional.cross_entropy(unscaled.view(-1, 64), labels.view(-1))
    return {"transformers": transformers.__version__, "ratio": float((out.logits / unscaled).mean()),
            "loss": float(out.loss), "unscaled_loss": float(loss)}


def reproduce() -> ReproResult:
    try:
        before = measured_apart(f"{__package__}.repro")
        after = measured_apart(f"{__package__}.repro", FIX_ID)
    except MeasureFailed as err:
        return ReproResult(Verdict.SKIPPED, f"needs torch and transformers (CPU): {err}")
    label = f"transformers {before['transformers']}"
    details = {"unpatched": before, "patched": after}
    right = lambda side: abs(side["ratio"] - 1) < 1e-4  # noqa: E731
    if right(before):
        return ReproResult(Verdict.NOT_REPRODUCED, f"{label}: logits unscaled (ratio {before['ratio']:.6f}) with "
                                                   "tie_word_embeddings false", details)
    fixed = f"with the hot-fix ratio {after['ratio']:.6f}, loss {after['loss']:.3f}" if right(after) else \
        f"with the hot-fix still {after['ratio']:.6f} ({after['hotfix']})"
    return ReproResult(Verdict.REPRODUCED, f"{label}: tie_word_embeddings false, yet the logits are scaled by "
                                           f"{before['ratio']:.6f} (d_model**-0.5 = {64 ** -0.5:.6f}): loss "
                                           f"{before['loss']:.3f} where the unscaled logits give "
                                           f"{before['unscaled_loss']:.3f}; {fixed}", details)


def main(argv: list[str] | None = None) -> int:
    return cli(reproduce, __doc__, argv, measure=measure)


if __name__ == "__main__":
    sys.exit(main())
