"""The measuring code of cost.py and gpu_routing.py, on the CPU: the interval, the
switching of the recipe's parts between steps (each part really on or off), the
two-pass gradient comparison, and the count of tokens rerouted in the recompute
(with RecomputeRoutingDrift: some without the pin, none with it). Their GPU runs are
in results/ and the README."""
import math

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")

from fixmono.fixes.transformers.moe_determinism import attention, conv1d, cost, experts, models  # noqa: E402
from fixmono.fixes.transformers.moe_determinism.gpu_routing import one_step  # noqa: E402


def test_mean_ci_by_hand():
    mean, half = cost.mean_ci([1.0, 2.0, 3.0, 4.0, 5.0])  # sd sqrt(2.5), df 4: t 2.78
    assert mean == 3.0 and math.isclose(half, 2.78 * math.sqrt(2.5) / math.sqrt(5))
    many = [float(i % 7) for i in range(200)]  # df beyond the table: 1.96
    assert math.isclose(cost.mean_ci(many)[1], 1.96 * __import__("statistics").stdev(many) / math.sqrt(200))
    assert math.isnan(cost.mean_ci([2.0])[1])


def test_variants_are_the_recipe_without_each_part():
    named = cost.variants()
    assert named["recipe"] == frozenset(cost.PARTS) and named["baseline"] == frozenset()
    for part in cost.PARTS:
        assert named[f"recipe without {part}"] == frozenset(cost.PARTS) - {part}
    assert all("," not in name for name in named)  # --variants is comma-separated


def test_switches_turn_each_part_on_and_off():
    model = models.tiny_model("qwen3_5_moe")
    switches = cost.Switches(model, attention.select(shape=(1, 2, 64, 32)))
    try:
        switches.set(cost.variants()["recipe"])
        assert torch.are_deterministic_algorithms_enabled()
        assert not torch.utils.deterministic.fill_uninitialized_memory
        assert model.config._experts_implementation == experts.NAME and conv1d._saved
        pinned = model(**models.batch())  # noqa: F841  (a checkpointed forward runs with the pin)
        switches.set(cost.variants()["recipe without experts"])
        assert model.config._experts_implementation == "eager" and torch.are_deterministic_algorithms_enabled()
        switches.set(cost.variants()["baseline"])
        assert not torch.are_deterministic_algorithms_enabled() and not conv1d._saved
        assert torch.utils.deterministic.fill_uninitialized_memory
        differ, tensors, losses_equal = cost.differing_grads(model, models.batch())
        assert (differ, losses_equal) == (0, True) and tensors == sum(p.requires_grad for p in model.parameters())
    finally:
        switches.set(frozenset())


def test_rerouted_tokens_counted_without_the_pin_none_with_it():
    model = models.tiny_model("qwen3_5_moe", experts="grouped_mm")
    data = models.batch()
    try:
        reference = one_step(model, data, pin=True, deterministic=True, scale=None)
        plain = one_step(model, data, pin=False, deterministic=True, scale=10.0)
        pinned = one_step(model, data, pin=True, deterministic=True, scale=10.0)
    finally:
        torch.use_deterministic_algorithms(False)
    assert 0 < plain["tokens_rerouted"] <= plain["tokens_recomputed"] == reference["tokens_recomputed"] > 0
    assert pinned["tokens_rerouted"] == 0 and pinned["drift_flips_seen"] == 0
    assert all(torch.equal(a, b) for a, b in zip(pinned["grads"], reference["grads"]))
    assert not all(torch.equal(a, b) for a, b in zip(plain["grads"], reference["grads"]))
