"""One call for deterministic MoE fine-tuning under activation checkpointing.

    from . import recipe
    for line in recipe.enable(model): print(line)
    # or: FIXMONO_DETERMINISTIC_MOE=1 and call recipe.enable_from_env(model)

What it turns on, each step logged: deterministic algorithms (and the cuBLAS
workspace setting they need), pinned routing (pin.py), experts with no index
accumulation (experts.py: under deterministic algorithms transformers' eager
experts take torch's slow sort-based index kernels), deterministic causal
conv1d (conv1d.py) and the fastest attention verified to be bitwise
reproducible here (attention.py; `attention_backend=` names one instead: "eager",
"math", "flash_attention", ...; FIXMONO_DETERMINISTIC_ATTENTION does the same).
"""
from __future__ import annotations

import os

import torch

from . import attention, conv1d, experts
from .pin import enable_pinned_routing


# attention_backend / FIXMONO_DETERMINISTIC_ATTENTION, besides "auto" and "eager". SDPBackend
# is a pybind11 enum: not iterable, so the names are spelled out (torch's and the short ones).
_B = torch.nn.attention.SDPBackend
BACKEND_NAMES = {"math": _B.MATH, "flash": _B.FLASH_ATTENTION, "flash_attention": _B.FLASH_ATTENTION,
                 "efficient": _B.EFFICIENT_ATTENTION, "efficient_attention": _B.EFFICIENT_ATTENTION,
                 "mem_efficient": _B.EFFICIENT_ATTENTION, "cudnn": _B.CUDNN_ATTENTION,
                 "cudnn_attention": _B.CUDNN_ATTENTION}


NAMED_TRIAL_SHAPE = (1, 4, 256, 64)  # a named backend is checked for being there and reproducible, not timed


def _attention_choice(name: str) -> attention.Choice:
    name = name.strip().lower()
    if name == "auto":
        return attention.select()
    if name == "eager":
        return attention.Choice(None, "any")
    if name not in BACKEND_NAMES:
        raise ValueError(f"attention backend {name!r}: expected auto, eager or one of {', '.join(BACKEND_NAMES)}")
    # tried here as auto tries each candidate: a backend this device or deterministic mode lacks is one
    # clear error now, not torch's "Invalid backend" in the middle of a training step
    device = "cpu" if attention.backend_kind() == "cpu" else "cuda"
    dtype = torch.float32 if device == "cpu" else torch.bfloat16
    backend = BACKEND_NAMES[name]
    trials = [attention.trial(name, attention.sdpa(backend), NAMED_TRIAL_SHAPE, dtype, device),
              attention.trial(f"{name} with grouped KV heads", _grouped(backend), NAMED_TRIAL_SHAPE, dtype, device)]
    for trial in trials:
        if trial.error:
            raise ValueError(f"attention backend {trial.name!r} cannot run here with deterministic algorithms on "
                             f"({trial.error}); use auto, eager or math")
        if not trial.reproducible:
            raise ValueError(f"attention backend {trial.name!r} is not bitwise reproducible here; "
                             "use auto, eager or math")
    return attention.Choice(backend, device, trials)


def _grouped(backend):
    """Causal SDPA with half as many KV heads (enable_gqa), as GQA models call it."""
    def attend(q, k, v):
        with torch.nn.attention.sdpa_kernel(backend):
            heads = k.shape[1] // 2
            return torch.nn.functional.scaled_dot_product_attention(q, k[:, :heads], v[:, :heads], is_causal=True,
                                                                    enable_gqa=True)
    return attend


def enable(model, attention_backend: str | None = None, replace_experts: bool = True,
           fill_uninitialized_memory: bool = False) -> list[str]:
    name = attention_backend or os.environ.get("FIXMONO_DETERMINISTIC_ATTENTION", "auto")
    lines = []
    os.environ.setdefault("CUBLAS_WORKSPACE_CONFIG", ":4096:8")  # cuBLAS reads it when its handle is made
    if getattr(torch.version, "hip", None):
        os.environ.setdefault("ROCBLAS_DEFAULT_ATOMICS_MODE", "0")
    torch.use_deterministic_algorithms(True)
    torch.backends.cudnn.deterministic, torch.backends.cudnn.benchmark = True, False
    # torch's NaN fill of every new tensor under determinism (7% of a Mixtral step, cost.py) only guards
    # ops that read memory nobody wrote; the recipe's bitwise checks run with it off
    torch.utils.deterministic.fill_uninitialized_memory = fill_uninitialized_memory
    lines.append(f"deterministic algorithms on (CUBLAS_WORKSPACE_CONFIG={os.environ['CUBLAS_WORKSPACE_CONFIG']}; "
                 f"new memory {'NaN-filled' if fill_uninitialized_memory else 'not filled'})")
    lines.append(enable_pinned_routing(model))
    if replace_experts:
        lines.append(experts.enable(model))
    lines.append(conv1d.enable(model))
    lines.append(attention.enable(model, _attention_choice(name)))
    return lines


def enable_from_env(model) -> list[str]:
    """recipe.enable(model) when FIXMONO_DETERMINISTIC_MOE=1, else nothing."""
    return enable(model) if os.environ.get("FIXMONO_DETERMINISTIC_MOE") == "1" else []


def disable(model=None) -> list[str]:
    torch.use_deterministic_algorithms(False)
    torch.utils.deterministic.fill_uninitialized_memory = True  # torch's default
    return [conv1d.disable(), attention.disable(), experts.disable(model),
            "deterministic algorithms off (routing stays pinned until checkpointing is re-enabled)"]
