"""experts.py on the CPU: the same function as transformers' eager experts (loss and
every gradient within fp32 rounding, for the three families), runs with deterministic
algorithms on and is bitwise equal run to run, drops expert-parallel sentinel slots
as eager does, and is switched on and off per model. The GPU half (speed and bitwise
checks at issue 15's sizes): cost.py and train.py."""
import copy

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")

from fixmono.fixes.transformers.moe_determinism import experts, models, recipe  # noqa: E402


@pytest.fixture
def deterministic():
    torch.use_deterministic_algorithms(True)
    yield
    torch.use_deterministic_algorithms(False)
    experts.disable()


def forward_backward(model, seed=0):
    loss = model(**models.batch(seed=seed)).loss
    loss.backward()
    grads = {n: p.grad.clone() for n, p in model.named_parameters() if p.grad is not None}
    model.zero_grad(set_to_none=True)
    return loss.detach(), grads


@pytest.mark.parametrize("family", models.FAMILIES)
def test_same_function_as_eager_and_bitwise_reproducible(family, deterministic):
    eager = models.tiny_model(family)
    replaced = copy.deepcopy(eager)
    assert "eager -> fixmono_deterministic" in experts.enable(replaced)
    loss, grads = forward_backward(eager)
    loss_r, grads_r = forward_backward(replaced)
    assert grads.keys() == grads_r.keys() and any("experts" in n for n in grads)
    torch.testing.assert_close(loss_r, loss, rtol=1e-5, atol=1e-6)
    for name in grads:
        torch.testing.assert_close(grads_r[name], grads[name], rtol=1e-4, atol=1e-6, msg=name)
    again_loss, again = forward_backward(replaced)
    assert torch.equal(again_loss, loss_r) and all(torch.equal(again[n], grads_r[n]) for n in grads)


def test_expert_parallel_sentinels_are_dropped(deterministic):
    """Slots routed to id num_experts (another rank's expert) add nothing, as in eager; the
    hidden-state gradient stays finite although the grouped GEMM leaves those rows unwritten."""
    model = models.tiny_model("mixtral")
    module = next(m for m in model.modules() if type(m).__name__.endswith("Experts"))
    module._is_expert_parallel = True
    tokens, hidden, k = 6, model.config.hidden_size, 2
    gen = torch.Generator().manual_seed(0)
    x = torch.randn(tokens, hidden, generator=gen, requires_grad=True)
    index = torch.randint(0, module.num_experts, (tokens, k), generator=gen)
    index[::2, 1] = module.num_experts  # sentinel
    weights = torch.rand(tokens, k, generator=gen)
    with torch.no_grad():
        expected = module(x, index, weights)  # the model's experts are eager, which skip id num_experts
    out = experts.deterministic_experts_forward(module, x, index, weights)
    out.sum().backward()
    assert torch.isfinite(x.grad).all()
    torch.testing.assert_close(out, expected, rtol=1e-5, atol=1e-6)

def test_enable_disable_per_model_and_all():
    first, second = models.tiny_model("mixtral"), models.tiny_model("qwen3_5_moe", experts="grouped_mm")
    experts.enable(first)
    assert experts.enable(first) == "deterministic experts: already fixmono_deterministic"
    experts.enable(second)
    assert experts.disable(first).endswith("-> eager (1 model(s))")
    assert first.config._experts_implementation == "eager"
    assert second.config._experts_implementation == experts.NAME
    assert "grouped_mm" in experts.disable()
    assert second.config._experts_implementation == "grouped_mm"
    assert experts.disable() == "deterministic experts: nothing to restore"


def test_transformers_without_experts_interface(monkeypatch):
    monkeypatch.setattr(experts, "register", lambda: False)
    model = models.tiny_model("mixtral")
    assert "not replaced" in experts.enable(model)
    assert model.config._experts_implementation == "eager"


def test_recipe_replaces_experts_and_turns_fill_off_then_restores():
    model = models.tiny_model("mixtral")
    try:
        lines = recipe.enable(model, attention_backend="eager")
        assert any(line.startswith("deterministic experts: eager ->") for line in lines)
        assert "new memory not filled" in lines[0]
        assert torch.utils.deterministic.fill_uninitialized_memory is False
        assert model.config._experts_implementation == experts.NAME
    finally:
        recipe.disable(model)
    assert torch.utils.deterministic.fill_uninitialized_memory is True
    assert model.config._experts_implementation == "eager"
    assert not torch.are_deterministic_algorithms_enabled()
    lines = recipe.enable(model, attention_backend="eager", replace_experts=False, fill_uninitialized_memory=True)
    try:
        assert model.config._experts_implementation == "eager" and "NaN-filled" in lines[0]
    finally:
        recipe.disable(model)
