"""transformers Trainer: a MoE model's router aux loss multiplied by the
data-parallel world size under average_tokens_across_devices
(huggingface/transformers#48690; PRs #48691 / #48706 open).

Declaration only: transform.py, ranks.py and repro.py (the Trainer runs for
real on 1 and N processes), hotfix.py, validate.py.
"""
from fixmono.model.fix import Case, Dep3, FileChange, Fix, Fixture, HotFix, lazy

from . import hotfix
from .transform import TRANSFORM, WHY

TARGET = "src/transformers/trainer.py"

_COMPUTE_LOSS = '''class Trainer:
    def compute_loss(self, model, inputs, return_outputs=False, num_items_in_batch=None):
        labels = inputs.pop("labels") if self.label_smoother is not None else None
        outputs = model(**inputs)
        loss = outputs["loss"] if labels is None else self.label_smoother(outputs, labels)
        if self.args.average_tokens_across_devices and num_items_in_batch is not None:
{block}        return (loss, outputs) if return_outputs else loss
'''


def _fixed(scale: str) -> str:
    return (f"            {WHY[0]}\n            {WHY[1]}\n"
            '            router_aux = outputs.get("aux_loss") if isinstance(outputs, dict) else None\n'
            "            if router_aux is not None and labels is None and self.compute_loss_func is None:\n"
            "                router_model = self.accelerator.unwrap_model(model)\n"
            '                router_coef = getattr(router_model, "router_aux_loss_coef", None)\n'
            "                if router_coef is None:  # the VL models read it from their text_config\n"
            '                    router_config = getattr(router_model, "config", None)\n'
            '                    router_config = getattr(router_config, "text_config", None) or router_config\n'
            '                    router_coef = getattr(router_config, "router_aux_loss_coef", 0.0)\n'
            "                router_aux = router_coef * router_aux.to(loss.device)\n"
            f"                loss = (loss - router_aux) * ({scale}) + router_aux\n"
            "            else:\n"
            f"                loss *= {scale}\n")


_NUM_PROCESSES = "self.accelerator.num_processes"
_N_GPU = "loss_scale if self.args.n_gpu <= 1 else self.args.n_gpu"
_TP = "            loss_scale = self.accelerator.num_processes // self.get_tp_size()\n"

CASES = (
    Case("4.46.2-4.56: loss *= num_processes", path=TARGET,
         before=_COMPUTE_LOSS.format(block=f"            loss *= {_NUM_PROCESSES}\n"),
         after=_COMPUTE_LOSS.format(block=_fixed(_NUM_PROCESSES))),
    Case("5.10+: a loss_scale over tp, then n_gpu", path=TARGET,
         before=_COMPUTE_LOSS.format(block=f"{_TP}            loss *= {_N_GPU}\n"),
         after=_COMPUTE_LOSS.format(block=_TP + _fixed(_N_GPU))),
    Case("already keeps aux_loss out", expect="already-applied", path=TARGET,
         before=_COMPUTE_LOSS.format(block='            aux_loss = outputs.get("aux_loss")\n'
                                           f"            loss = (loss - aux_loss) * {_NUM_PROCESSES} + aux_loss\n")),
    Case("4.46.1 and older: no token averaging across devices", expect="not-applicable", path=TARGET,
         before=_COMPUTE_LOSS.replace("        if self.args.average_tokens_across_devices and num_items_in_batch is "
                                      "not None:\n{block}", "")),
    Case("two scalings of the loss", expect="failed", path=TARGET,
         before=_COMPUTE_LOSS.format(block=f"            loss *= {_NUM_PROCESSES}\n            loss *= 2\n")),
    Case("the loss scaled some other way", expect="failed", path=TARGET,
         before=_COMPUTE_LOSS.format(block=f"            loss = loss * {_NUM_PROCESSES}\n")),
    Case("the name router_aux is taken", expect="failed", path=TARGET,
         before=_COMPUTE_LOSS.format(block=f"            router_aux = 0\n            loss *= {_NUM_PROCESSES}\n")),
    Case("no outputs to read aux_loss from", expect="failed", path=TARGET,
         before=_COMPUTE_LOSS.replace("outputs = model(**inputs)", "model(**inputs)")
         .replace('outputs["loss"]', "self._loss").replace("(loss, outputs)", "(loss, None)")
         .format(block=f"            loss *= {_NUM_PROCESSES}\n")),
)

FIX = Fix(
    id="transformers-moe-aux-loss-world-size",
    title="Trainer: keep a MoE model's router aux loss out of the world-size loss scaling",
    upstream="transformers",
    description="""\
With average_tokens_across_devices (opt-in from 4.46.2, the default from
4.54.0), Trainer.compute_loss multiplies the model's loss by the number of
data-parallel processes, so that DDP's gradient averaging of a loss divided
by the tokens of all ranks gives the global mean. A MoE model (mixtral,
qwen2/3_moe, olmoe, qwen3_vl_moe ...) has already added
router_aux_loss_coef * aux_loss to that loss, and its aux_loss is a per-rank
mean that DDP's averaging already makes right: the multiplication scales the
router's load-balancing gradient by the world size, so moving a batch from
one process to N changes training. Scale only the token-normalized part of
the model's own loss; leave custom losses (compute_loss_func, the label
smoother) and models without aux_loss as they were.""",
    dep3=Dep3(
        origin="vendor",
        bug="https://github.com/huggingface/transformers/issues/48690",
        forwarded="no",
        last_update="2026-11-24",
    ),
    backends=("cuda", "rocm", "cpu"),
    changes=(FileChange(TARGET, TRANSFORM, sites=1,
                        fixture=Fixture("fixtures/trainer.py", mutate=("Trainer.compute_loss",), edit="move")),),
    references=("https://github.com/huggingface/transformers/issues/48690",
                "https://github.com/huggingface/transformers/pull/48691",
                "https://github.com/huggingface/transformers/pull/48706"),
    cases=CASES,
    hotfix=HotFix(apply=hotfix.enable, remove=hotfix.disable, trigger="transformers.trainer"),
    reproduce=lazy(f"{__package__}.repro:reproduce"),
    repro_needs="cpu",
    validate=lazy(f"{__package__}.validate:check"),
)
