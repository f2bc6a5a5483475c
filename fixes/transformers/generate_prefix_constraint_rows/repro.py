"""Reproducer: generate() gives prefix_allowed_tokens_fn the wrong prompt's id
for every extra returned sequence.

    python -m fixmono.fixes.transformers.generate_prefix_constraint_rows.repro [--json]

A tiny random Llama (CPU) samples 2 sequences for each of 2 prompts with a
constraint per prompt (prompt 0 may emit only tokens 10-12, prompt 1 only
20-22) looked up by the batch id the processor passes. Rows are prompts
expanded num_return_sequences times, but the processor was told num_beams
(1), so row r got batch id r, not r // 2. Counted: the batch ids the
function saw, and the returned sequences that break their own prompt's
constraint. Measured on the installed transformers, then in a fresh
interpreter with the hot-fix. Exit 1 reproduced, 0 not reproduced, 77 skipped.
"""
from __future__ import annotations

import sys

from fixmono.model.fix import ReproResult, Verdict
from fixmono.runtime.repro import MeasureFailed, cli, measured_apart

FIX_ID = "transformers-generate-prefix-constraint-rows"
ALLOWED = {0: [10, 11, 12], 1: [20, 21, 22]}


def measure() -> dict:
    import torch
    import transformers
    from transformers import LlamaConfig, LlamaForCausalLM

    torch.manual_seed(0)
    model = LlamaForCausalLM(LlamaConfig(vocab_size=50, hidden_size=32, intermediate_size=64, num_hidden_layers=1,
                                         num_attention_heads=4, num_key_value_heads=4, pad_token_id=0,
                                         eos_token_id=1, bos_token_id=2)).eval()
    seen = set()

    def allowed(batch_id, ids):
        seen.add(int(batch_id))
        return ALLOWED.get(int(batch_id), list(range(3, 50)))  # an id with no prompt: unconstrained

    prompts = torch.tensor([[2, 5, 6], [2, 7, 8]])
    out = model.generate(prompts, attention_mask=torch.ones_like(prompts), do_sample=True, num_return_sequences=2,
                         max_new_tokens=6, prefix_allowed_tokens_fn=allowed)
    rows = out[:, prompts.shape[1]:].tolist()
    broken = [r for r, row in enumerate(rows) if any(t not in ALLOWED[r // 2] for t in row)]
    return {"transformers": transformers.__version__, "batch_ids": sorted(seen), "broken_rows": broken,
            "rows": len(rows)}


def reproduce() -> ReproResult:
    try:
        before = measured_apart(f"{__package__}.repro")
        after = measured_apart(f"{__package__}.repro", FIX_ID)
    except MeasureFailed as err:
        return ReproResult(Verdict.SKIPPED, f"needs torch and transformers (CPU): {err}")
    label = f"transformers {before['transformers']}"
    details = {"unpatched": before, "patched": after}
    if before["batch_ids"] == [0, 1] and not before["broken_rows"]:
        return ReproResult(Verdict.NOT_REPRODUCED, f"{label}: the constraint function saw batch ids [0, 1] and "
                                                   "every sequence keeps its prompt's constraint", details)
    fixed = "with the hot-fix ids [0, 1], none broken" if after["batch_ids"] == [0, 1] and not after["broken_rows"] \
        else f"with the hot-fix still ids {after['batch_ids']}, rows {after['broken_rows']} ({after['hotfix']})"
    return ReproResult(Verdict.REPRODUCED, f"{label}: 2 prompts x 2 samples: the constraint function saw batch ids "
                                           f"{before['batch_ids']}, {len(before['broken_rows'])} of "
                                           f"{before['rows']} sequences break their prompt's constraint; {fixed}",
                       details)


def main(argv: list[str] | None = None) -> int:
    return cli(reproduce, __doc__, argv, measure=measure)


if __name__ == "__main__":
    sys.exit(main())
