"""--validate runs each fix's behavioural check (Fix.validate) on the patched
text. For every fix (from discovery), on its declared fixtures: the check
passes on the transformation's output and rejects the unfixed text (what a
transformation that edits nothing useful leaves); through make_patch, a wrong
transformation output becomes `failed` with the check's reason, and exit 1."""
import dataclasses
import json

import pytest

from fixmono.apply import run as apply_run
from fixmono.cli import make_patch as cli
from fixmono.apply.contract import apply_change
from fixmono.model.fix import ValidationNote
from fixmono.model.outcome import FixOutcome, Status
from fixmono.model.errors import FixtureUnavailable
from fixmono.model.registry import discover
from fixmono.testing import catalogue_tree, for_fix, make_patch, make_repo

FIXES = [for_fix(f.id, f, id=f.id) for f in discover()]


def texts(fix):
    """{path: fixture text} and {path: the transformation's output} for `fix`."""
    before, after = {}, {}
    for change in fix.changes:
        try:
            before[change.path] = fix.fixture_text(change)
        except FixtureUnavailable as err:
            pytest.skip(str(err))
        outcome = apply_change(change, before[change.path])
        assert outcome.status is Status.APPLIED, outcome.detail
        after[change.path] = outcome.new_text
    return before, after


@pytest.mark.parametrize("fix", FIXES)
def test_every_fix_declares_a_check_that_passes_the_fix_and_rejects_no_fix(fix):
    assert fix.validate is not None, f"{fix.id} declares no validate="
    before, after = texts(fix)
    passed = fix.validate(before, after)
    assert passed is None or isinstance(passed, ValidationNote), passed  # a note says what was checked
    problem = fix.validate(before, dict(before))
    assert problem and not isinstance(problem, ValidationNote) and "\n" not in problem, problem


@pytest.mark.parametrize("fix", FIXES)
def test_a_wrong_output_fails_validation_with_the_reason(tmp_path, monkeypatch, capsys, fix):
    """make_patch --validate, with the transformation's output replaced by the
    unfixed text (status applied, as a broken transformation would report)."""
    try:
        tree = catalogue_tree(fix.upstream)
    except FixtureUnavailable as err:
        pytest.skip(str(err))
    repo = make_repo(tmp_path / fix.upstream, tree)
    real = apply_run.apply_fix

    def wrong(f, read, *rest):
        if f.id != fix.id:
            return real(f, read, *rest)
        unchanged = {c.path: read(c.path).decode() for c in f.changes if read(c.path) is not None}
        return FixOutcome(f, Status.APPLIED, "edited (wrongly)", (), unchanged)

    monkeypatch.setattr(apply_run, "apply_fix", wrong)
    monkeypatch.setattr(apply_run, "revert_through_git", lambda upstream, outcome, patched: outcome)
    assert cli.main([fix.id, "--upstream", str(repo), "--check", "--validate", "--json"]) == 1
    (result,) = json.loads(capsys.readouterr().out)["runs"][0]["results"]
    assert result["status"] == "failed" and result["detail"].startswith("validation: "), result
    before = {c.path: tree[c.path] for c in fix.changes if c.path in tree}  # what make_patch validated
    assert fix.validate(before, before) in result["detail"]  # the check's own reason


def test_validate_passes_the_real_transformations(tmp_path):
    repo = make_repo(tmp_path / "pytorch", catalogue_tree("pytorch"))
    run = make_patch("--all", "--upstream", str(repo), "--check", "--validate", "--json")
    assert run.returncode == 0, run.stderr
    statuses = {r["fix"]: r["status"] for r in json.loads(run.stdout)["runs"][0]["results"]}
    assert set(statuses.values()) == {"applied"}, statuses
    report = json.loads(run.stdout)["runs"][0]
    passed = sum("compile check not run" not in r["detail"] for r in report["results"])  # g++ and headers here?
    assert report["validated"] == {"passed": passed, "compile not run": len(statuses) - passed, "failed": 0,
                                   "no check": 0}
    assert all("validated: " in r["detail"] for r in report["results"])  # each says its check ran
    text = make_patch("--all", "--upstream", str(repo), "--check", "--validate").stdout
    assert f"--validate: {len(statuses)} fix(es) applied: {passed} passed their check, {len(statuses) - passed} " \
           "passed it but for a compile step that could not run here, 0 failed it, 0 declare none" in text
    assert "--validate:" not in make_patch("--all", "--upstream", str(repo), "--check").stdout


def test_validate_says_so_where_a_fix_declares_no_check(tmp_path, monkeypatch, capsys):
    fix = next(f for f in discover() if f.upstream == "pytorch" and f.validate)
    repo = make_repo(tmp_path / "pytorch", catalogue_tree("pytorch"))
    monkeypatch.setattr(cli, "discover", lambda: [dataclasses.replace(fix, validate=None)])
    assert cli.main([fix.id, "--upstream", str(repo), "--check", "--validate", "--json"]) == 0
    report = json.loads(capsys.readouterr().out)["runs"][0]
    assert report["validated"] == {"passed": 0, "compile not run": 0, "failed": 0, "no check": 1}
    assert report["results"][0]["detail"].endswith("; not validated: this fix declares no check")


def test_a_check_that_could_not_run_is_not_counted_as_passed(tmp_path, monkeypatch, capsys):
    """A compile check without g++ or headers says why it did not run: 'not run', not 'passed'."""
    from fixmono.model.fix import NotChecked
    fix = next(f for f in discover() if f.upstream == "pytorch" and f.validate)
    repo = make_repo(tmp_path / "pytorch", catalogue_tree("pytorch"))
    monkeypatch.setattr(cli, "discover", lambda: [dataclasses.replace(
        fix, validate=lambda before, after: NotChecked("compile check not run: no g++ here"))])
    assert cli.main([fix.id, "--upstream", str(repo), "--check", "--validate", "--json"]) == 0
    report = json.loads(capsys.readouterr().out)["runs"][0]
    assert report["validated"] == {"passed": 0, "compile not run": 1, "failed": 0, "no check": 0}
    assert report["results"][0]["detail"].endswith("; validated: its check passed, but compile check not run: no g++ here")


@pytest.mark.parametrize("crash", [ValueError("too many values to unpack (expected 1)"), KeyError("Trainer"),
                                   SystemExit(2), RecursionError("maximum recursion depth exceeded")])
def test_a_crashing_check_is_that_fixs_failure_not_an_internal_error(tmp_path, monkeypatch, capsys, crash):
    """A validate() that raises is the fix's `failed` naming the exception (exit 1); the next fix still runs."""
    fixes = [f for f in discover() if f.upstream == "pytorch" and f.validate][:2]
    repo = make_repo(tmp_path / "pytorch", catalogue_tree("pytorch"))

    def crashes(before, after):
        raise crash
    monkeypatch.setattr(cli, "discover", lambda: [dataclasses.replace(fixes[0], validate=crashes), fixes[1]])
    assert cli.main([fixes[0].id, fixes[1].id, "--upstream", str(repo), "--check", "--validate", "--json"]) == 1
    results = json.loads(capsys.readouterr().out)["runs"][0]["results"]
    assert results[0]["status"] == "failed"
    assert results[0]["detail"] == f"validation: its check crashed: {type(crash).__name__}: {crash}"
    assert results[1]["status"] == "applied" and "validated: " in results[1]["detail"]
