"""Compare two model checkpoints tensor by tensor (safetensors files or folders).

For each tensor name: equal (bitwise), max |a - b| in fp32, and the number of
differing elements; names present on one side only count as differences.
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from fixmono.model.errors import UserError


@dataclass(frozen=True)
class TensorDiff:
    name: str
    equal: bool
    max_abs_delta: float | None  # None when shapes or dtypes differ, or one side lacks it
    differing: int | None
    note: str = ""


def safetensors_files(path: Path) -> list[Path]:
    if path.is_file():
        return [path]
    if path.is_dir():
        files = sorted(path.glob("*.safetensors"))
        if files:
            return files
        raise UserError(f"{path}: no *.safetensors files in this folder")
    raise UserError(f"{path}: no such file or folder")


def load(path: Path) -> dict:
    from safetensors import SafetensorError
    from safetensors.torch import load_file

    tensors = {}
    for file in safetensors_files(path):
        try:
            tensors.update(load_file(file))
        except (SafetensorError, OSError) as err:
            raise UserError(f"{file}: not a readable safetensors file ({err})") from None
    return tensors


def compare(a: dict, b: dict) -> list[TensorDiff]:
    diffs = []
    for name in sorted(set(a) | set(b)):
        if name not in a or name not in b:
            diffs.append(TensorDiff(name, False, None, None, f"only in {'first' if name in a else 'second'}"))
            continue
        x, y = a[name], b[name]
        if x.shape != y.shape or x.dtype != y.dtype:
            diffs.append(TensorDiff(name, False, None, None, f"{tuple(x.shape)} {x.dtype} vs {tuple(y.shape)} {y.dtype}"))
            continue
        differing = int((x != y).sum()) if x.numel() else 0
        delta = float((x.float() - y.float()).abs().max()) if x.numel() else 0.0
        diffs.append(TensorDiff(name, differing == 0, delta, differing))
    return diffs


def summary(diffs: list[TensorDiff]) -> str:
    bad = [d for d in diffs if not d.equal]
    deltas = [d.max_abs_delta for d in diffs if d.max_abs_delta is not None]
    return (f"{len(bad)} of {len(diffs)} tensors differ; max |delta| = {max(deltas, default=0.0):.3g}; "
            f"{sum(d.differing or 0 for d in bad)} differing elements")
