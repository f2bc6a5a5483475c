"""PyTorch Inductor (Triton): masked() drops a pad's fill value when the load is
served from the CSE store cache; compiled cu_seqlens prologues give [n, n]
(pytorch/pytorch#189895, PR #189896; in torch 2.14.0).

Imported by `fixmono import` from the change as released (the 2.13.0 and
2.14.0 wheels' triton.py, restricted to the fix: github.com, where the pull
request is, cannot be reached from here). Written by hand: repro.py (a CUDA
device) and the fields below.
"""
from fixmono.engines.imported import declare
from fixmono.model.fix import Dep3, lazy

FIX = declare(__file__, id="pytorch-inductor-masked-store-cache", upstream="pytorch",
              dep3=Dep3(origin="upstream, https://github.com/pytorch/pytorch/pull/189896 (as in the torch 2.14.0 wheel)",
                        bug="https://github.com/pytorch/pytorch/issues/189895",
                        forwarded="not-needed", applied_upstream="torch 2.14.0",
                        last_update="2026-11-26"),
              backends=("cuda", "rocm"),
              references=("https://github.com/pytorch/pytorch/issues/189895",
                          "https://github.com/pytorch/pytorch/pull/189896"),
              reproduce=lazy(f"{__package__}.repro:reproduce"), repro_needs="cuda")
