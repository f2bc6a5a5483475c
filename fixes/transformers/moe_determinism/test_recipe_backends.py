"""Every attention backend name recipe.enable takes (issue 15 part 4: the
names crashed on torch 2.13, whose SDPBackend is a pybind11 enum that cannot
be iterated), through the argument and the environment variable, on the CPU:
the recipe enables, a training step runs where the backend exists on this
device, and a backend the device lacks fails in the step with torch's own
"no available kernel" error, never at enable(). Unknown names: one clear
ValueError."""
import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")

from fixes.transformers.moe_determinism import models, recipe  # noqa: E402

CPU_KERNELS = {"math", "flash", "flash_attention"}  # SDPA kernels torch has on the CPU


@pytest.fixture
def clean():
    yield
    recipe.disable()
    torch.use_deterministic_algorithms(False)


@pytest.mark.parametrize("name", ["auto", "eager", *recipe.BACKEND_NAMES, "MATH", " Flash "])
def test_every_backend_name(name, clean):
    model = models.tiny_model("mixtral")
    lines = recipe.enable(model, attention_backend=name)
    assert any(line.startswith("deterministic attention") for line in lines), lines
    step = lambda: model(**models.batch()).loss.backward()  # noqa: E731
    if name.strip().lower() in {"auto", "eager"} | CPU_KERNELS:
        step()
    else:
        with pytest.raises(RuntimeError, match="No viable backend for scaled_dot_product_attention"):
            step()


@pytest.mark.parametrize("name", ["math", "efficient_attention", "eager"])
def test_the_environment_variable_takes_the_same_names(name, monkeypatch, clean):
    monkeypatch.setenv("FIXMONO_DETERMINISTIC_ATTENTION", name)
    lines = recipe.enable(models.tiny_model("mixtral"))
    expected = "using eager" if name == "eager" else f"limited to {recipe.BACKEND_NAMES[name].name.lower()}"
    assert any(expected in line for line in lines), lines


def test_unknown_name_is_one_clear_error(clean):
    with pytest.raises(ValueError, match="attention backend 'fastest': expected auto, eager or one of math"):
        recipe.enable(models.tiny_model("mixtral"), attention_backend="fastest")
