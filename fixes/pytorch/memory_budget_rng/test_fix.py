"""The partitioner fix on the installed torch (2.13.0, the default upstream;
its text is read from site-packages at test time), on the CPU: the
transformation, the whole RNG family through the compiled backward before and
after, the reproducer, --validate and the hot-fix."""
import shutil

import pytest

torch = pytest.importorskip("torch")

from fixmono.runtime.child import child_env
from fixmono.apply.contract import apply_change  # noqa: E402
from fixmono.model.outcome import Status
from fixmono.runtime.define import module_source  # noqa: E402
from fixmono.fixes.pytorch.memory_budget_rng import hotfix, partitioner, repro  # noqa: E402
from fixmono.fixes.pytorch.memory_budget_rng.fix import FIX, TARGET  # noqa: E402
from fixmono.fixes.pytorch.memory_budget_rng.validate import check  # noqa: E402


@pytest.fixture(scope="module")
def fixed():
    return partitioner.fixed_functions()


def test_installed_torch_gets_exactly_three_lines_changed():
    source = module_source(partitioner.MODULE)
    outcome = apply_change(FIX.changes[0], source)
    assert outcome.status is Status.APPLIED, outcome.detail
    old, new = source.splitlines(), outcome.new_text.splitlines()
    assert len(old) == len(new)
    changed = [(a.strip(), b.strip()) for a, b in zip(old, new) if a != b]
    assert [a for a, _ in changed] == ["return get_aten_target(node) in self.random_ops",
                                       "if memory_budget == 0:",
                                       'if i.meta.get("recompute", False) == CheckpointPolicy.MUST_SAVE']
    assert all(b.startswith(a.rstrip(":")) for a, b in changed)  # each only extended


@pytest.mark.parametrize("op", partitioner.RANDOM_OPS)
def test_every_rng_op_gets_the_forwards_randomness_in_the_backward(op, fixed):
    """The class of input: every RNG op we know of, at budgets 0 and 0.5
    (wrong without the fix) and 1 (right either way)."""
    before = [partitioner.probe(op, b)["wrong"] for b in (0.0, 0.5, 1.0)]
    with partitioner.installed(fixed):
        after = [partitioner.probe(op, b)["wrong"] for b in (0.0, 0.5, 1.0)]
    assert before[0] > 0 and before[1] > 0 and before[2] == 0, before
    assert after == [0, 0, 0]


def test_budget_in_between_and_a_graph_without_randomness_unchanged(fixed):
    """Budgets other than 0/0.5 take the same knapsack path; a graph with no
    random op partitions exactly as before (the fix only looks at RNG)."""
    import torch._functorch.config as fconfig

    for budget in (0.05, 0.3, 0.9):
        with partitioner.installed(fixed):
            assert partitioner.probe("dropout", budget)["wrong"] == 0

    def f(x, w):
        return (x.sin() * w).cos() * x

    def grads():
        torch._dynamo.reset()
        x, w = torch.linspace(-1, 1, 512, requires_grad=True), torch.full((512,), 0.5, requires_grad=True)
        with fconfig.patch(activation_memory_budget=0.0, enable_autograd_cache=False):
            torch.compile(f, backend="aot_eager_decomp_partition")(x, w).sum().backward()
        return x.grad, w.grad

    plain = grads()
    with partitioner.installed(fixed):
        patched = grads()
    assert all(torch.equal(a, b) for a, b in zip(plain, patched))


@pytest.mark.skipif(not shutil.which("cc") and not shutil.which("gcc"), reason="inductor needs a C compiler")
def test_inductor_too(fixed):
    before = [partitioner.probe("dropout", b, backend="inductor")["wrong"] for b in (0.0, 0.5)]
    with partitioner.installed(fixed):
        after = [partitioner.probe("dropout", b, backend="inductor")["wrong"] for b in (0.0, 0.5)]
    assert min(before) > 0 and after == [0, 0]


def test_reproducer_is_two_sided_on_the_cpu():
    result = repro.reproduce()
    assert result.verdict.value == "reproduced", result.summary
    assert all(r["wrong"] > 0 for r in result.details["unpatched"] if r["budget"] < 1)
    assert all(r["wrong"] == 0 for r in result.details["patched"])


def test_where_the_fix_cannot_be_written_the_unpatched_verdict_still_stands(monkeypatch):
    """torch 2.4-2.7 have no MUST_SAVE filter, so the transformation refuses; the reproducer
    (run by drift --run on every release) still measures the unpatched partitioner there."""
    from fixmono.model.errors import TransformFailed

    def refused():
        raise TransformFailed("choose_saved_values_set: expected at most one MUST_SAVE filter, found 0")

    monkeypatch.setattr(partitioner, "fixed_functions", refused)
    result = repro.reproduce()
    assert result.verdict.value == "reproduced" and "the fix does not apply here" in result.summary
    assert result.details["patched"] is None and "MUST_SAVE" in result.details["unfixable"]


def test_settings_a_torch_lacks_are_left_out():
    import types

    torch_2_4 = types.SimpleNamespace(activation_memory_budget=1.0)
    assert partitioner.known_settings(torch_2_4, activation_memory_budget=0.5, enable_autograd_cache=False) == {
        "activation_memory_budget": 0.5}
    import torch._functorch.config as fconfig

    assert partitioner.known_settings(fconfig, activation_memory_budget=0.5, enable_autograd_cache=False) == {
        "activation_memory_budget": 0.5, "enable_autograd_cache": False}


def test_validate_passes_the_fix_and_rejects_the_unfixed_text():
    source = module_source(partitioner.MODULE)
    fixed_text = apply_change(FIX.changes[0], source).new_text
    assert check({TARGET: source}, {TARGET: fixed_text}) is None
    assert "fresh randomness" in check({TARGET: source}, {TARGET: source})


def test_hotfix_round_trip():
    import torch._functorch.config as fconfig

    module = partitioner.module()
    original, cache = module.choose_saved_values_set, fconfig.enable_autograd_cache
    assert hotfix.enable().startswith("enabled")
    try:
        assert hotfix.enable() == "already enabled"
        assert fconfig.enable_autograd_cache is False
        with fconfig.patch(activation_memory_budget=0.0):
            torch._dynamo.reset()
            x, w = torch.ones(4096, requires_grad=True), torch.ones(4096, requires_grad=True)
            y = torch.compile(lambda a, b: torch.nn.functional.dropout(a, 0.5, True) * b,
                              backend="aot_eager_decomp_partition")(x, w)
            y.sum().backward()
        assert torch.equal(x.grad, y.detach())  # w = 1: the gradient is the forward's own mask x 2
    finally:
        assert hotfix.disable().startswith("disabled")
    assert module.choose_saved_values_set is original and fconfig.enable_autograd_cache == cache
    assert hotfix.disable().startswith("not enabled")


def test_hotfix_refuses_when_the_cache_is_forced_on():
    """TORCHINDUCTOR_AUTOGRAD_CACHE=1 overrides any setting: the hot-fix must
    say so and leave the partitioner as it was (a fresh process: the variable
    is read when torch's config loads)."""
    import os
    import subprocess
    import sys

    code = ("from fixmono.fixes.pytorch.memory_budget_rng import hotfix, partitioner\n"
            "before = partitioner.module().choose_saved_values_set\n"
            "print(hotfix.enable())\n"
            "print(partitioner.module().choose_saved_values_set is before)\n")
    env = child_env({**os.environ, "TORCHINDUCTOR_AUTOGRAD_CACHE": "1"})
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True).stdout
    message, unchanged = out.strip().splitlines()[-2:]
    assert message.startswith("not enabled: TORCHINDUCTOR_AUTOGRAD_CACHE=1") and unchanged == "True"
