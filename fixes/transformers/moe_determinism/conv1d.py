"""Deterministic causal depthwise conv1d for GatedDeltaNet layers
(Qwen3.5/3.6-MoE, Qwen3-Next, Qwen3.5).

transformers falls back to F.conv1d (cuDNN on CUDA, MIOpen on ROCm) when no
causal-conv1d kernel is installed; its weight-gradient kernels may reduce in
a run-dependent order. The replacement computes y[t] = sum_w x[t-W+1+w] * k[w]
as W shifted multiply-adds, whose forward and backward have a fixed order
(no atomics), or uses fla's Triton kernel on GPU where it is installed (its
backward sums weight gradients per chunk in fp32, then `.sum(0)`: no atomics).

Both call styles are handled: transformers 5.2-5.5 keep the function in the
layer's `causal_conv1d_fn` attribute, 5.23 calls the module-level
`causal_conv1d_fn` of modeling_qwen3_5_moe / qwen3_next / qwen3_5.
"""
from __future__ import annotations

import importlib

import torch
import torch.nn.functional as F

MODULES = ("transformers.models.qwen3_5_moe.modeling_qwen3_5_moe",
           "transformers.models.qwen3_next.modeling_qwen3_next",
           "transformers.models.qwen3_5.modeling_qwen3_5")
_ACTIVATIONS = {None: lambda y: y, "silu": F.silu, "swish": F.silu}
_saved: dict = {}


def shifted_causal_conv1d(x: torch.Tensor, weight: torch.Tensor, bias=None, activation=None) -> torch.Tensor:
    """x [B, D, T], weight [D, W] (or [D, 1, W]) -> [B, D, T], in a fixed order."""
    weight = weight.reshape(weight.shape[0], -1).to(x.dtype)
    width, seq = weight.shape[1], x.shape[-1]
    padded = F.pad(x, (width - 1, 0))
    y = padded[..., 0:seq] * weight[:, 0, None]
    for w in range(1, width):
        y = y + padded[..., w:w + seq] * weight[:, w, None]
    if bias is not None:
        y = y + bias.to(x.dtype)[:, None]
    return _ACTIVATIONS[activation](y)


def _fla_conv():
    try:
        from fla.modules.conv import causal_conv1d
    except ImportError:
        return None
    return causal_conv1d


def deterministic_causal_conv1d(x, weight, bias=None, activation=None, seq_idx=None, **kwargs):
    """Drop-in for transformers' causal_conv1d_fn (both call styles)."""
    fla = _fla_conv() if x.is_cuda else None
    if fla is not None and seq_idx is None:
        y, _ = fla(x.transpose(1, 2), weight=weight.reshape(weight.shape[0], -1), bias=bias, activation=activation)
        return y.transpose(1, 2)
    return shifted_causal_conv1d(x, weight, bias, activation)


def enable(model=None) -> str:
    """Replace the conv1d function module-wide (5.23 style) and on the given
    model's layers (5.2-5.5 style). Idempotent; disable() restores."""
    changed = []
    for name in MODULES:
        try:
            module = importlib.import_module(name)
        except ImportError:
            continue
        if hasattr(module, "causal_conv1d_fn") and name not in _saved:
            _saved[name] = module.causal_conv1d_fn
            module.causal_conv1d_fn = deterministic_causal_conv1d
            changed.append(name.rsplit(".", 1)[-1])
    layers = 0
    for layer in (model.modules() if model is not None else ()):
        if hasattr(layer, "causal_conv1d_fn") and layer.causal_conv1d_fn is not deterministic_causal_conv1d:
            layer.causal_conv1d_fn = deterministic_causal_conv1d
            layers += 1
    backend = "fla Triton kernel on GPU" if _fla_conv() else "shifted multiply-adds"
    return (f"deterministic causal conv1d ({backend}): {', '.join(changed) or 'no new modules'}; "
            f"{layers} layer attribute(s) replaced")


def disable() -> str:
    for name, original in list(_saved.items()):
        importlib.import_module(name).causal_conv1d_fn = original
        del _saved[name]
    return "deterministic causal conv1d: module functions restored (layer attributes keep theirs)"
