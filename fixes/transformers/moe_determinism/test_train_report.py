"""train.py's report (the README's determinism table is pasted from it): every mode of
every configuration, and every step's loss of every run, a loss in bold exactly where
it differs (bitwise) from the same mode's other run; --config names are checked."""
import json

import pytest

from fixmono.fixes.transformers.moe_determinism import train


def result(losses_1, losses_2, differing):
    runs = [{"trainable_tensors": 4, "losses": losses_1, "step_ms": 100.0},
            {"trainable_tensors": 4, "losses": losses_2, "step_ms": 110.0}]
    return {"runs": runs, "differing_tensors": differing, "max_abs_delta": 0.5 if differing else 0.0}


def test_report_marks_differing_losses(tmp_path):
    (tmp_path / "determinism_A.json").write_text(json.dumps({
        "baseline": result([2.0, 1.5, 1.25], [2.0, 1.5, 1.2500001], 4),
        "recipe": result([2.0, 1.5, 1.25], [2.0, 1.5, 1.25], 0)}))
    (tmp_path / "determinism_C.json").write_text(json.dumps({"recipe": {
        "runs": [{"error": "CUDA out of memory"}, {"error": "CUDA out of memory"}],
        "differing_tensors": None, "max_abs_delta": None}}))
    text = train.write_report(tmp_path)
    assert text == (tmp_path / "determinism.md").read_text()
    assert "| A | baseline | 4/4 | 0.5 | 100, 110 |" in text and "| A | recipe | 0/4 | 0.0 | 100, 110 |" in text
    assert "| C | recipe | run failed | None | CUDA out of memory, CUDA out of memory |" in text
    assert "| 3 | **1.250000** | **1.250000** | 1.250000 | 1.250000 |" in text
    assert "| 2 | 1.500000 | 1.500000 | 1.500000 | 1.500000 |" in text


def test_unknown_config_is_one_line(capsys):
    with pytest.raises(SystemExit) as exit_:
        train.main(["--out", "x", "--config", "A,Z"])
    assert exit_.value.code == 2 and "unknown Z" in capsys.readouterr().err
