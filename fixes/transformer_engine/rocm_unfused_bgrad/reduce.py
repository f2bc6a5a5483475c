"""Bias grad as a column sum of grad_output [tokens, N] (bf16/fp16) to fp32.

`column_sum` uses a two-stage Triton kernel on GPU when Triton is installed,
else torch. Both are deterministic (a fixed summation order for a given shape
and device), so immediate and delayed wgrad calls agree bitwise; the two give
different fp32 roundings from each other. The Triton kernel splits the token
axis over enough programs to fill the GPU even for narrow N, where torch's
single-pass column reduction has too little parallelism (see bench.py).
"""
from __future__ import annotations

import functools

import torch


def torch_column_sum(dy: torch.Tensor) -> torch.Tensor:
    return dy.reshape(-1, dy.shape[-1]).sum(dim=0, dtype=torch.float32)


@functools.lru_cache(maxsize=None)
def _triton_kernel():
    try:
        import triton
        import triton.language as tl
    except ImportError:
        return None

    @triton.jit
    def partial_column_sum(dy, part, T, N, rows_per_prog, BLOCK_T: tl.constexpr, BLOCK_N: tl.constexpr):
        pid_n = tl.program_id(0)
        pid_t = tl.program_id(1)
        cols = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
        col_ok = cols < N
        start = pid_t * rows_per_prog
        stop = tl.minimum(start + rows_per_prog, T)
        acc = tl.zeros((BLOCK_T, BLOCK_N), dtype=tl.float32)
        for t in range(start, stop, BLOCK_T):
            rows = t + tl.arange(0, BLOCK_T)
            mask = (rows < stop)[:, None] & col_ok[None, :]
            x = tl.load(dy + rows[:, None].to(tl.int64) * N + cols[None, :], mask=mask, other=0.0)
            acc += x.to(tl.float32)
        tl.store(part + pid_t * N + cols, tl.sum(acc, axis=0), mask=col_ok)

    return partial_column_sum


def triton_available() -> bool:
    return torch.cuda.is_available() and _triton_kernel() is not None


def triton_column_sum(dy: torch.Tensor, programs: int | None = None) -> torch.Tensor:
    """Two-stage column sum. `programs` caps the first stage's grid (default:
    4 per SM), e.g. to leave SMs to a concurrent GEMM."""
    dy = dy.reshape(-1, dy.shape[-1]).contiguous()
    t, n = dy.shape
    block_t, block_n = 32, 128
    col_blocks = -(-n // block_n)
    target = programs or 4 * torch.cuda.get_device_properties(dy.device).multi_processor_count
    split = max(1, min(-(-t // block_t), -(-target // col_blocks)))
    rows_per_prog = -(-(-(-t // split)) // block_t) * block_t
    split = max(1, -(-t // rows_per_prog))
    part = torch.empty(split, n, device=dy.device, dtype=torch.float32)
    _triton_kernel()[(col_blocks, split)](dy, part, t, n, rows_per_prog, BLOCK_T=block_t, BLOCK_N=block_n)
    return part.sum(dim=0) if split > 1 else part[0]


def column_sum(dy: torch.Tensor) -> torch.Tensor:
    if dy.is_cuda and dy.dtype in (torch.bfloat16, torch.float16) and triton_available():
        return triton_column_sum(dy)
    return torch_column_sum(dy)
