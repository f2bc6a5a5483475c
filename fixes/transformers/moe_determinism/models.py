"""Tiny MoE models built from transformers configs (random weights, no downloads)."""
from __future__ import annotations

import torch

FAMILIES = ("qwen3_5_moe", "mixtral", "deepseek_v3")
COMMON = dict(vocab_size=128, hidden_size=64, num_hidden_layers=2, num_attention_heads=4,
              num_key_value_heads=2, max_position_embeddings=128, pad_token_id=0)


def config(family: str):
    if family == "qwen3_5_moe":
        from transformers import Qwen3_5MoeTextConfig

        return Qwen3_5MoeTextConfig(**COMMON, head_dim=16, moe_intermediate_size=32,
                                    shared_expert_intermediate_size=32, num_experts=8, num_experts_per_tok=2,
                                    linear_key_head_dim=16, linear_value_head_dim=16, linear_num_key_heads=2,
                                    linear_num_value_heads=4, layer_types=["linear_attention", "full_attention"])
    if family == "mixtral":
        from transformers import MixtralConfig

        return MixtralConfig(**COMMON, intermediate_size=32, num_local_experts=8, num_experts_per_tok=2)
    if family == "deepseek_v3":
        from transformers import DeepseekV3Config

        return DeepseekV3Config(**{**COMMON, "num_key_value_heads": 4}, intermediate_size=64, moe_intermediate_size=32, n_routed_experts=8,
                                num_experts_per_tok=2, n_group=2, topk_group=1, n_shared_experts=1,
                                first_k_dense_replace=0, q_lora_rank=None, kv_lora_rank=16,
                                qk_rope_head_dim=8, qk_nope_head_dim=8, v_head_dim=16)
    raise ValueError(f"unknown MoE family {family!r} (known: {', '.join(FAMILIES)})")


def tiny_model(family: str, experts: str = "eager", seed: int = 0, dtype=torch.float32):
    from transformers import AutoModelForCausalLM

    torch.manual_seed(seed)
    cfg = config(family)
    cfg._attn_implementation = "eager"
    model = AutoModelForCausalLM.from_config(cfg, dtype=dtype)
    model.set_experts_implementation(experts)
    return model.train()


def batch(vocab: int = 128, seed: int = 0, size: tuple[int, int] = (2, 24)):
    gen = torch.Generator().manual_seed(seed)
    ids = torch.randint(1, vocab, size, generator=gen)
    return {"input_ids": ids, "labels": ids.clone()}
