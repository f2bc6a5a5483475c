"""Every attention backend name recipe.enable takes (issue 15 part 4: the
names crashed on torch 2.13, whose SDPBackend is a pybind11 enum that cannot
be iterated), through the argument and the environment variable, on the CPU:
a backend this device has is tried (bitwise reproducible, as auto checks
each candidate) and a training step runs; one it lacks is one ValueError at
enable() with torch's reason, not an error in the middle of training.
Unknown names: one clear ValueError. The GPU half: gpu_backends.py."""
import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")

from fixmono.fixes.transformers.moe_determinism import models, recipe  # noqa: E402

CPU_KERNELS = {"math", "flash", "flash_attention"}  # SDPA kernels torch has on the CPU


@pytest.fixture
def clean():
    yield
    recipe.disable()
    torch.use_deterministic_algorithms(False)


@pytest.mark.parametrize("name", ["eager", *recipe.BACKEND_NAMES, "MATH", " Flash "])  # auto: test_attention.py
def test_every_backend_name(name, clean):
    """Names of backends the CPU has: enabled, verified, a training step runs.
    The others: one ValueError at enable(), naming what torch said."""
    model = models.tiny_model("mixtral")
    if name.strip().lower() not in {"auto", "eager"} | CPU_KERNELS:
        with pytest.raises(ValueError, match=f"attention backend '{name.strip().lower()}' cannot run here"):
            recipe.enable(model, attention_backend=name)
        return
    lines = recipe.enable(model, attention_backend=name)
    attention_line = [line for line in lines if line.startswith("deterministic attention")][0]
    assert "not verified" not in attention_line
    model(**models.batch()).loss.backward()


@pytest.mark.parametrize("name", ["math", "flash_attention", "eager"])
def test_the_environment_variable_takes_the_same_names(name, monkeypatch, clean):
    monkeypatch.setenv("FIXMONO_DETERMINISTIC_ATTENTION", name)
    lines = recipe.enable(models.tiny_model("mixtral"))
    expected = "using eager" if name == "eager" else f"limited to {recipe.BACKEND_NAMES[name].name.lower()}"
    assert any(expected in line for line in lines), lines


def test_unknown_name_is_one_clear_error(clean):
    with pytest.raises(ValueError, match="attention backend 'fastest': expected auto, eager or one of math"):
        recipe.enable(models.tiny_model("mixtral"), attention_backend="fastest")
