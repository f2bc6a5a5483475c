"""GPU half of the backend-name check (device tool): every attention backend
name through recipe.enable and one bf16 training step of the tiny Mixtral on
CUDA, with deterministic algorithms on. Records, per name, the enable line and
the step's outcome. A backend this GPU or deterministic mode lacks must be
refused at enable() with torch's reason, never fail in the step.

    python -m fixmono.fixes.transformers.moe_determinism.gpu_backends --out results.json
"""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path


def main(argv=None) -> int:
    import torch

    from . import models, recipe

    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--out", type=Path, required=True)
    args = p.parse_args(argv)
    rows = {}
    for name in ["auto", "eager", *recipe.BACKEND_NAMES]:
        model = models.tiny_model("mixtral", dtype=torch.bfloat16).cuda()
        row = {}
        try:
            row["enable"] = [line for line in recipe.enable(model, attention_backend=name)
                             if line.startswith("deterministic attention")][0]
            batch = {k: v.cuda() for k, v in models.batch().items()}
            model(**batch).loss.backward()
            torch.cuda.synchronize()
            row["step"] = "done"
        except ValueError as err:  # the recipe's refusal of a backend it tried and could not use
            row["enable"] = f"refused: {err}"
        except RuntimeError as err:  # torch's, in the step: what the recipe's trial should have caught
            row["step"] = f"RuntimeError: {str(err).splitlines()[0][:160]}"
        finally:
            recipe.disable()
        rows[name] = row
        print(name, row, flush=True)
    args.out.write_text(json.dumps({"torch": torch.__version__, "gpu": torch.cuda.get_device_name(),
                                    "backends": rows}, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
