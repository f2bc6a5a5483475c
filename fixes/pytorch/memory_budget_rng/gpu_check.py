"""GPU check (device tool): every RNG op of the family through a compiled
backward on CUDA (inductor), at budgets 0 and 0.5, with the installed
partitioner and the fixed one, then the benchmark on the GPU.

    python -m fixmono.fixes.pytorch.memory_budget_rng.gpu_check --fixed-source PATH --out results.json

PATH: the device torch's partitioners.py, transformed here beforehand (the
GPU image has no libcst)."""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path


def main(argv=None) -> int:
    import torch
    from . import bench, partitioner

    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--fixed-source", type=Path, required=True)
    p.add_argument("--out", type=Path, required=True)
    p.add_argument("--batch", type=int, default=256)
    args = p.parse_args(argv)
    fixed = partitioner.functions_from(args.fixed_source.read_text())
    family = []
    for op in partitioner.RANDOM_OPS:
        for budget in (0.0, 0.5):  # 1.0 was never wrong (the CPU tests show it)
            before = partitioner.probe(op, budget, backend="inductor", device="cuda")["wrong"]
            with partitioner.installed(fixed):
                after = partitioner.probe(op, budget, backend="inductor", device="cuda")["wrong"]
            family.append({"op": op, "budget": budget, "wrong_installed": before, "wrong_fixed": after})
            print(family[-1], flush=True)
    timing = bench.run(argparse.Namespace(steps=30, backend="inductor", device="cuda", budgets=[0.0, 0.5, 1.0],
                                          fixed_source=args.fixed_source, batch=args.batch))
    args.out.write_text(json.dumps({"torch": torch.__version__, "gpu": torch.cuda.get_device_name(),
                                    "family": family, "bench": timing}, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
