"""PyTorch memory-budget partitioner: random ops recomputed with fresh
randomness (pytorch/pytorch#190717, #190758).

Declaration only: transform.py, partitioner.py (the functions run for real),
repro.py, hotfix.py, validate.py, bench.py.
"""
from fixmono.model.fix import Case, Dep3, FileChange, Fix, Fixture, HotFix, installed_file, lazy

from . import hotfix
from .transform import TRANSFORM
from .validate import TARGET

_OPTYPES = '''class OpTypes:
    def is_random(self, node):
        return {random}
'''
_CHOOSE = '''def choose_saved_values_set(joint_graph, node_info, memory_budget=1):
    if {shortcut}:
        return node_info.inputs
    banned = solve(joint_graph)
    must_save_nodes = [
        i for i in banned if {must_save}
    ]
    return node_info.inputs + must_save_nodes
'''
_UNFIXED = dict(random="get_aten_target(node) in self.random_ops", shortcut="memory_budget == 0",
                must_save='i.meta.get("recompute", False) == CheckpointPolicy.MUST_SAVE')
_FIXED = dict(random='get_aten_target(node) in self.random_ops or torch.Tag.nondeterministic_seeded in '
                     'getattr(node.target, "tags", ())',
              shortcut="memory_budget == 0 and not any(get_default_op_list().is_random(n) for n in joint_graph.nodes)",
              must_save='i.meta.get("recompute", False) == CheckpointPolicy.MUST_SAVE or '
                        'get_default_op_list().is_random(i)')


def _source(**parts) -> str:
    values = {**_UNFIXED, **parts}
    return _OPTYPES.format(**values) + "\n\n" + _CHOOSE.format(**values)


CASES = (
    Case("random ops recomputable under a budget", before=_source(), after=_source(**_FIXED)),
    Case("already fixed", expect="already-applied", before=_source(**_FIXED)),
    Case("budget-0 shortcut gone upstream (only the rest is added)",
         before=_source().replace("    if memory_budget == 0:\n        return node_info.inputs\n", ""),
         after=_source(**_FIXED).replace(
             "    if memory_budget == 0 and not any(get_default_op_list().is_random(n) for n in joint_graph.nodes):\n"
             "        return node_info.inputs\n", "")),
    Case("is_random as a conditional expression keeps its meaning",
         before=_source(random="a if b else c"),
         after=_source(**{**_FIXED, "random": '(a if b else c) or torch.Tag.nondeterministic_seeded in '
                                              'getattr(node.target, "tags", ())'})),
    Case("no partitioner here (torch before the memory budget)", expect="not-applicable",
         before="def min_cut_rematerialization_partition(joint_module):\n    return joint_module\n"),
    Case("MUST_SAVE filtered some other way", expect="failed",
         before=_source(must_save="keep(i)")),
    Case("is_random with two returns", expect="failed",
         before=_source(random="get_aten_target(node) in self.random_ops\n        return False")),
)

FIX = Fix(
    id="pytorch-memory-budget-rng-recompute",
    title="memory-budget partitioner: never recompute random ops (dropout gradients)",
    upstream="pytorch",
    description="""\
With torch._functorch.config.activation_memory_budget below 1, the
partitioner may recompute random ops (dropout's rand, randn, multinomial,
...) in the backward graph, where they draw fresh randomness: the gradient
flows through a dropout mask the forward never applied, silently. At budget 0
choose_saved_values_set returns the inputs without the min-cut whose ban on
recomputing random ops is the safeguard; between 0 and 1 the knapsack trades
the banned random ops back into recompute; and the ban itself knows three
ops only. Random ops are now recognised by their nondeterministic_seeded tag,
kept out of the knapsack like MUST_SAVE nodes, and budget 0 takes its
shortcut only when the forward has none, so the min-cut saves the cheapest
value downstream of each random op and the budget governs everything else.""",
    dep3=Dep3(
        origin="other",
        bug="https://github.com/pytorch/pytorch/issues/190758",
        forwarded="no",
        last_update="2026-11-23",
    ),
    backends=("cuda", "rocm", "cpu"),
    changes=(FileChange(TARGET, TRANSFORM, sites=3,
                        fixture=Fixture(installed_file("torch", "_functorch/partitioners.py"),
                                        mutate=("is_random", "choose_saved_values_set"), edit="replace")),),
    references=("https://github.com/pytorch/pytorch/issues/190717",
                "https://github.com/pytorch/pytorch/issues/190758",
                "https://github.com/pytorch/pytorch/pull/190759",
                "https://github.com/pytorch/pytorch/pull/191684"),
    cases=CASES,
    hotfix=HotFix(apply=hotfix.enable, remove=hotfix.disable, trigger="torch"),
    reproduce=lazy(f"{__package__}.repro:reproduce"),
    repro_needs="cpu",
    validate=lazy(f"{__package__}.validate:check"),
)
