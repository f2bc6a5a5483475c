"""--validate: the written `Trainer.compute_loss`, defined alone, run on doubles
of a Trainer on rank 0 of 4 data-parallel processes (tp 1) and of a model that
returns its loss and aux_loss as a ModelOutput does. The token-normalized part
must be scaled by 4 and the router term `coef * aux_loss` not at all, with the
coefficient on the model, on its config or on its text_config; a dense model's
loss, a compute_loss_func's and a single process's must come out as before."""
from __future__ import annotations

import ast
import builtins
from types import SimpleNamespace
from typing import Mapping

from .fix import TARGET

WORLD, CE, AUX, COEF = 4, 2.0, 0.5, 0.1


class Anything:
    """Stands for the module's other names (annotations, logger, helpers): any attribute or call is itself."""

    def __getattr__(self, name):
        return self

    def __call__(self, *args, **kwargs):
        return self


class Globals(dict):
    def __missing__(self, key):
        return getattr(builtins, key, Anything())


def compute_loss(text: str):
    (cls,) = [n for n in ast.parse(text).body if isinstance(n, ast.ClassDef) and n.name == "Trainer"]
    (function,) = [n for n in cls.body if isinstance(n, ast.FunctionDef) and n.name == "compute_loss"]
    scope = Globals()
    exec(compile(ast.Module(body=[function], type_ignores=[]), "<Trainer.compute_loss>", "exec"), scope)  # noqa: S102
    return scope["compute_loss"]


class Model:
    """The model double: called like a module, returns `outputs`; the coefficient
    on the model itself, on its config or on its config's text_config."""

    def __init__(self, outputs: dict, coef_on: str | None):
        self.outputs, self.config = outputs, SimpleNamespace()
        if coef_on == "model":
            self.router_aux_loss_coef = COEF
        elif coef_on == "config":
            self.config.router_aux_loss_coef = COEF
        elif coef_on == "text_config":
            self.config.text_config = SimpleNamespace(router_aux_loss_coef=COEF)

    def __call__(self, **inputs):
        return self.outputs


def run(function, coef_on: str | None, world: int = WORLD, custom: bool = False) -> float:
    """The loss compute_loss gives on rank 0 of `world` processes."""
    import torch

    aux = torch.tensor(AUX)
    outputs = {"loss": torch.tensor(CE) + (COEF * aux if coef_on else 0.0), "aux_loss": aux if coef_on else None}
    trainer = SimpleNamespace(
        args=SimpleNamespace(average_tokens_across_devices=True, n_gpu=1, past_index=-1),
        accelerator=SimpleNamespace(num_processes=world, unwrap_model=lambda m: m, parallelism_config=None),
        label_smoother=None, model_accepts_loss_kwargs=True, get_tp_size=lambda: 1,
        compute_loss_func=(lambda out, labels, num_items_in_batch=None: out["loss"]) if custom else None)
    return float(function(trainer, Model(outputs, coef_on), {"input_ids": None}, num_items_in_batch=torch.tensor(8)))


def check(before: Mapping[str, str], after: Mapping[str, str]) -> str | None:
    try:
        import torch  # noqa: F401
    except ImportError as err:
        return f"cannot validate: torch is not importable here ({err})"
    function = compute_loss(after[TARGET])
    try:
        return compare(function)
    except Exception as err:  # noqa: BLE001 - the written text run on doubles: say what broke, in one line
        return f"the written compute_loss raised {type(err).__name__} on the doubles: {err}"


def compare(function) -> str | None:
    expected = CE * WORLD + COEF * AUX
    for coef_on in ("model", "config", "text_config"):
        got = run(function, coef_on)
        if abs(got - expected) > 1e-6:
            return (f"coef on the {coef_on}: loss {got:g} on {WORLD} processes, expected {expected:g} "
                    f"(cross-entropy x {WORLD}, the router term once)")
    for what, got, want in (("a dense model", run(function, None), CE * WORLD),
                            ("compute_loss_func", run(function, "model", custom=True), (CE + COEF * AUX) * WORLD),
                            ("one process", run(function, "model", world=1), CE + COEF * AUX)):
        if abs(got - want) > 1e-6:
            return f"{what}: loss {got:g}, expected {want:g} (as before the fix)"
    return None
