"""One rank of the reproducer's data-parallel run (started by repro.py, one
process per rank, WORLD_SIZE/RANK/MASTER_* in the environment as torchrun
sets them; none for a single process):

    python -m fixmono.fixes.transformers.moe_aux_loss_world_size.ranks OUT [--hotfix]

A tiny MoE causal LM (qwen3_moe, or mixtral on releases before it; 2 layers,
4 experts, top 2, CPU), the same initial weights on every rank, trained for one
step by the installed `Trainer` (DDP on gloo when WORLD_SIZE > 1) with plain
SGD at lr 1, no clipping, no decay: the change of each router weight is its
gradient. Every rank holds `PER_RANK` copies of one sequence, so each rank's
batch, and the single process's, is the same batch. Done twice, with the router
aux-loss coefficient 0 and COEF; rank 0 writes the router weights' changes to OUT.
"""
from __future__ import annotations

import json
import os
import sys

COEFS = (0.0, 0.1)
PER_RANK, SEQ, VOCAB = 2, 12, 64
SHAPE = dict(vocab_size=VOCAB, hidden_size=32, intermediate_size=64, num_hidden_layers=2, num_attention_heads=2,
             num_key_value_heads=1, max_position_embeddings=64, output_router_logits=True)
FAMILIES = {  # model -> (config class, model class, its own config keys)
    "qwen3_moe": ("Qwen3MoeConfig", "Qwen3MoeForCausalLM",
                  dict(moe_intermediate_size=16, num_experts=4, num_experts_per_tok=2, decoder_sparse_step=1,
                       mlp_only_layers=[], head_dim=16)),
    "mixtral": ("MixtralConfig", "MixtralForCausalLM", dict(num_local_experts=4, num_experts_per_tok=2)),
}


def family():
    import transformers

    for name, (config, model, keys) in FAMILIES.items():
        if hasattr(transformers, config) and hasattr(transformers, model):
            return name, getattr(transformers, config), getattr(transformers, model), keys
    raise ImportError("neither qwen3_moe nor mixtral is in this transformers")


def router_weights(model) -> dict:
    return {name: p for name, p in model.named_parameters() if name.endswith(".gate.weight") and p.dim() == 2}


def one_step(coef: float, world: int, folder: str) -> tuple[str, dict]:
    import torch
    from transformers import Trainer, TrainingArguments

    name, config_class, model_class, keys = family()
    torch.manual_seed(0)
    model = model_class(config_class(**SHAPE, **keys, router_aux_loss_coef=coef))
    before = {k: p.detach().clone() for k, p in router_weights(model).items()}
    ids = torch.randint(0, VOCAB, (SEQ,), generator=torch.Generator().manual_seed(1))
    data = [{"input_ids": ids.clone(), "labels": ids.clone()} for _ in range(world * PER_RANK)]
    options = dict(output_dir=folder, per_device_train_batch_size=PER_RANK,
                   max_steps=1, learning_rate=1.0, optim="sgd", lr_scheduler_type="constant", weight_decay=0.0,
                   max_grad_norm=0.0, use_cpu=True, report_to="none", save_strategy="no", logging_strategy="no",
                   disable_tqdm=True, seed=0, ddp_timeout=120)
    if world > 1:
        options["ddp_backend"] = "gloo"
    if "average_tokens_across_devices" in TrainingArguments.__dataclass_fields__:
        options["average_tokens_across_devices"] = True  # the default from 4.54.0; opt-in from 4.46.2
    Trainer(model=model, args=TrainingArguments(**options), train_dataset=data).train()
    return name, {k: (before[k] - p.detach()).tolist() for k, p in router_weights(model).items()}


def main(argv: list[str]) -> int:
    out, hotfix = argv[0], "--hotfix" in argv[1:]
    import transformers

    message = ""
    if hotfix:
        from . import hotfix as runtime

        message = runtime.enable()
    world = int(os.environ.get("WORLD_SIZE", "1"))
    folder = os.path.join(os.path.dirname(os.path.abspath(out)), f"trainer-rank{os.environ.get('RANK', '0')}")
    steps = {str(coef): one_step(coef, world, folder) for coef in COEFS}
    if int(os.environ.get("RANK", "0")) == 0:
        with open(out, "w") as f:
            json.dump({"release": transformers.__version__, "world": world, "hotfix": message,
                       "family": steps[str(COEFS[0])][0], "deltas": {c: d for c, (_, d) in steps.items()}}, f)
    return 0


if __name__ == "__main__":
    code = main(sys.argv[1:])
    # Out without the interpreter's teardown (its output is written and closed): a rank's
    # gloo threads and C++ static destructors at exit are no part of the result, and
    # CI saw ranks killed by SIGABRT with nothing printed.
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)
