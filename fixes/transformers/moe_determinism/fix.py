"""Deterministic MoE fine-tuning under activation checkpointing (transformers, PyTorch).

Declaration only. Runtime: pin.py (routing pin), conv1d.py, attention.py,
recipe.py (all of them in one call). Upstream form: transform.py. CPU
reproducer: repro.py; GPU determinism runs: train.py.
"""
from fixmono.model.fix import Case, Dep3, FileChange, Fix, Fixture, HotFix, installed_file, lazy

from .transform import (
    CHECKPOINTING_TRANSFORM, MODELING_UTILS_PY, MOE_PY, MOE_TRANSFORM)

_ENABLE = '''class PreTrainedModel:
    def gradient_checkpointing_enable(self, gradient_checkpointing_kwargs=None):
        if gradient_checkpointing_kwargs is None:
            gradient_checkpointing_kwargs = {{"use_reentrant": False}}
{insert}
        gradient_checkpointing_func = functools.partial(checkpoint, **gradient_checkpointing_kwargs)
        self._set_gradient_checkpointing(enable=True, gradient_checkpointing_func=gradient_checkpointing_func)
'''
_INSERTED = '''
        # `pin_moe_routing`: replay MoE top-k routing in the recompute (integrations/moe.py)
        from .integrations.moe import pin_moe_routing_kwargs
        gradient_checkpointing_kwargs = pin_moe_routing_kwargs(gradient_checkpointing_kwargs)
'''

CASES = (
    Case("checkpointing kwargs pass through pin_moe_routing_kwargs", path=MODELING_UTILS_PY,
         before=_ENABLE.format(insert=""), after=_ENABLE.format(insert=_INSERTED.rstrip("\n") + "\n")),
    Case("5.23 naming: activation_checkpointing_kwargs", path=MODELING_UTILS_PY,
         before=_ENABLE.format(insert="").replace("gradient_checkpointing_kwargs", "activation_checkpointing_kwargs"),
         after=_ENABLE.format(insert=_INSERTED.rstrip("\n") + "\n").replace(
             "gradient_checkpointing_kwargs", "activation_checkpointing_kwargs")),
    Case("already accepts pin_moe_routing", path=MODELING_UTILS_PY, expect="already-applied",
         before=_ENABLE.format(insert=_INSERTED.rstrip("\n") + "\n")),
    Case("checkpointing built in a nested block: refuse", path=MODELING_UTILS_PY, expect="failed",
         before=_ENABLE.format(insert="").replace(
             "        gradient_checkpointing_func = functools.partial(checkpoint, **gradient_checkpointing_kwargs)",
             "        if True:\n            gradient_checkpointing_func = functools.partial(checkpoint, "
             "**gradient_checkpointing_kwargs)")),
    Case("not a PreTrainedModel file", path=MODELING_UTILS_PY, expect="not-applicable",
         before="def checkpoint(fn, *args):\n    return fn(*args)\n"),
    Case("moe.py already has the pin", path=MOE_PY, expect="already-applied",
         before="class PinnedTopK:\n    pass\n\n\ndef pinned_routing_contexts():\n    pass\n\n\n"
                "def pin_moe_routing_kwargs(kwargs):\n    return kwargs\n"),
    Case("moe.py with a half-added pin: refuse", path=MOE_PY, expect="failed",
         before="class PinnedTopK:\n    pass\n"),
)


_ENABLED = []  # the recipe turned on by this hot-fix: what remove() may turn off


def _apply(model=None, attention_backend=None) -> str:
    if model is None:
        return "MoE determinism: needs the model: FIX.hotfix.apply(model=model)"
    from . import recipe

    lines = recipe.enable(model, attention_backend)
    _ENABLED[:] = [True]
    return "; ".join(lines)


def _remove() -> str:
    if not _ENABLED:  # never enabled: nothing to undo (no torch imported, no user setting changed)
        return "not enabled; nothing to do"
    from . import recipe

    _ENABLED.clear()
    return "; ".join(recipe.disable())


FIX = Fix(
    id="transformers-pin-moe-routing",
    title="Add pin_moe_routing: replay MoE top-k routing in the activation-checkpointing recompute",
    upstream="transformers",
    description="""\
Under activation checkpointing each layer is recomputed in the backward. When
near-tied router probabilities flip the top-k experts between the forward and
the recompute (bf16 drift from non-deterministic conv1d, attention backward
and GEMMs, seen on ROCm fine-tuning Qwen3.5/3.6-MoE), eager experts save a
different number of tensors and torch.utils.checkpoint raises CheckpointError
at step 2, and grouped_mm experts silently recompute with other experts.

`pin_moe_routing=True` in the checkpointing kwargs records every top-k's
indices in each checkpointed forward and returns them in its recompute, with
the values gathered at them, through checkpoint's context_fn (one store per
region, so accumulation and out-of-order backward work). It is generic: it
covers every router built on torch.topk (softmax-topk, topk-softmax and
DeepSeek's group-limited routers) without per-model code. Needs
use_reentrant=False.""",
    dep3=Dep3(origin="vendor", forwarded="no", last_update="2026-11-22",
              bug="https://github.com/NVIDIA-NeMo/Automodel/pull/3156"),
    backends=("rocm", "cuda", "cpu"),
    # tested on the installed transformers' own files: that release's upstream text
    changes=(FileChange(MOE_PY, MOE_TRANSFORM, sites=1,
                        fixture=Fixture(installed_file("transformers", "integrations/moe.py"),
                                        mutate=("<module>",), edit="insert")),
             FileChange(MODELING_UTILS_PY, CHECKPOINTING_TRANSFORM, sites=1,
                        fixture=Fixture(installed_file("transformers", "modeling_utils.py"),
                                        mutate=("@gradient_checkpointing_func",), edit="insert"))),
    references=("https://github.com/NVIDIA/Megatron-LM/blob/main/megatron/core/transformer/moe/router_replay.py",),
    cases=CASES,
    hotfix=HotFix(apply=_apply, remove=_remove, trigger="transformers.modeling_utils"),
    reproduce=lazy(f"{__package__}.repro:reproduce"),
    repro_needs="cpu",
    validate=lazy(f"{__package__}.validate:check"),
)
