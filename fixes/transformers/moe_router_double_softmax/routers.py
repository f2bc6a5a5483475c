"""The MoE families whose router returned probabilities (5.0.0-5.5.4), and the
checks run on real routers: on a router class alone (defined from file text)
and through a tiny model of a family (output_router_logits=True)."""
from __future__ import annotations

import ast
from dataclasses import dataclass


@dataclass(frozen=True)
class Family:
    name: str  # transformers/models/<name>/
    routers: tuple[str, ...]  # its <X>TopKRouter classes
    style: str = "qwen"  # the fixture shaped like it: qwen, float (softmax of .float()), omni (three routers)
    optional: bool = False  # absent from some releases in range
    model: str = ""  # a ForCausalLM the reproducer builds tiny ("": none)

    @property
    def path(self) -> str:
        return f"src/transformers/models/{self.name}/modeling_{self.name}.py"

    @property
    def module(self) -> str:
        return f"transformers.models.{self.name}.modeling_{self.name}"

    @property
    def fixture_routers(self) -> tuple[str, ...]:
        return {"qwen": ("TinyMoeTopKRouter",), "float": ("SmallMixTopKRouter",),
                "omni": ("TinyOmniThinkerTextTopKRouter", "TinyOmniTalkerTextTopKRouter",
                         "TinyOmniTextTopKRouter")}[self.style]


FAMILIES = (
    Family("mixtral", ("MixtralTopKRouter",), "float", model="Mixtral"),
    Family("minimax", ("MiniMaxTopKRouter",), "float"),
    Family("qwen2_moe", ("Qwen2MoeTopKRouter",), model="Qwen2Moe"),
    Family("qwen3_moe", ("Qwen3MoeTopKRouter",), model="Qwen3Moe"),
    Family("qwen3_vl_moe", ("Qwen3VLMoeTextTopKRouter",)),
    Family("olmoe", ("OlmoeTopKRouter",), model="Olmoe"),
    Family("flex_olmo", ("FlexOlmoTopKRouter",)),
    Family("qwen3_next", ("Qwen3NextTopKRouter",)),
    Family("qwen3_5_moe", ("Qwen3_5MoeTopKRouter",), optional=True),  # from 5.2.0
    Family("qwen3_omni_moe", ("Qwen3OmniMoeTextTopKRouter", "Qwen3OmniMoeThinkerTextTopKRouter",
                              "Qwen3OmniMoeTalkerTextTopKRouter"), "omni"),
)
EXPERTS, TOP_K, HIDDEN = 8, 2, 16


def router_classes(text: str) -> dict[str, type]:
    """Every <X>TopKRouter class of a modeling file's text, defined alone (its body needs
    only torch, nn and F)."""
    import torch
    import torch.nn.functional as F
    from torch import nn

    classes = {}
    for node in ast.parse(text).body:
        if isinstance(node, ast.ClassDef) and node.name.endswith("TopKRouter"):
            scope = {"torch": torch, "nn": nn, "F": F}
            exec(compile(ast.Module(body=[node], type_ignores=[]), f"<{node.name}>", "exec"), scope)  # noqa: S102
            classes[node.name] = scope[node.name]
    return classes


def check_router(cls: type, seed: int = 0) -> dict:
    """One router's forward on random tokens: is what it returns as router_logits the raw
    logits (hidden @ weight.T), and are its top-k choices those of the softmax?"""
    import torch
    import torch.nn.functional as F
    from torch import nn

    torch.manual_seed(seed)
    router = cls.__new__(cls)
    nn.Module.__init__(router)
    router.top_k, router.num_experts, router.hidden_dim, router.norm_topk_prob = TOP_K, EXPERTS, HIDDEN, True
    router.weight = nn.Parameter(torch.randn(EXPERTS, HIDDEN))
    hidden = torch.randn(32, HIDDEN)
    returned, scores, indices = router(hidden)
    raw = F.linear(hidden, router.weight)
    top_value, top_index = torch.topk(torch.softmax(raw.float(), dim=-1), TOP_K, dim=-1)
    return {"returns_raw_logits": bool(torch.allclose(returned.float(), raw.float(), atol=1e-6)),
            "returns_probabilities": bool(torch.allclose(returned.float().sum(-1), torch.ones(32), atol=1e-5)),
            "same_choice": bool(torch.equal(indices, top_index)),
            "same_weights": bool(torch.allclose(scores.float(), top_value / top_value.sum(-1, keepdim=True),
                                                atol=1e-6))}


def check_model(family: Family, seed: int = 0) -> dict:
    """A tiny <family>ForCausalLM of the installed transformers (one layer, 8 experts, top 2)
    with output_router_logits=True: do the recorded router_logits rows sum to 1, and is the
    gradient of the model's aux_loss on the router weight the one load_balancing_loss_func
    gives from the raw logits (hidden @ weight.T)?"""
    import importlib

    import torch
    import torch.nn.functional as F

    module = importlib.import_module(family.module)
    config_class = getattr(importlib.import_module(family.module.replace(".modeling_", ".configuration_")),
                           f"{family.model}Config")
    experts = {"num_local_experts": EXPERTS} if family.model == "Mixtral" else {"num_experts": EXPERTS}
    config = config_class(vocab_size=64, hidden_size=HIDDEN, intermediate_size=32, moe_intermediate_size=32,
                          num_hidden_layers=1, num_attention_heads=2, num_key_value_heads=1, head_dim=8,
                          num_experts_per_tok=TOP_K, output_router_logits=True, router_aux_loss_coef=1.0,
                          shared_expert_intermediate_size=32, decoder_sparse_step=1, mlp_only_layers=[],
                          max_position_embeddings=64, bos_token_id=0, eos_token_id=0, pad_token_id=0, **experts)
    torch.manual_seed(seed)
    model = getattr(module, f"{family.model}ForCausalLM")(config).float()
    router = next(m for m in model.modules() if type(m).__name__.endswith("TopKRouter"))
    with torch.no_grad():
        router.weight.normal_()
    seen = []
    handle = router.register_forward_pre_hook(lambda _m, args: seen.append(args[0].detach()))
    try:
        out = model(input_ids=torch.randint(0, 64, (2, 12)), output_router_logits=True)
    finally:
        handle.remove()
    (grad,) = torch.autograd.grad(out.aux_loss, router.weight)
    raw = F.linear(seen[0].reshape(-1, HIDDEN), router.weight)
    reference = module.load_balancing_loss_func((raw,), EXPERTS, TOP_K)
    (ref_grad,) = torch.autograd.grad(reference, router.weight)
    recorded = out.router_logits[0].float()
    return {"router_logits_rows_sum_to_1": bool(torch.allclose(recorded.sum(-1), torch.ones(len(recorded)),
                                                              atol=1e-5)),
            "aux_loss": out.aux_loss.item(), "reference_aux_loss": reference.item(),
            "grad_rel_error": float((grad - ref_grad).norm() / ref_grad.norm()),
            "grad_norm_ratio": float(grad.norm() / ref_grad.norm())}
