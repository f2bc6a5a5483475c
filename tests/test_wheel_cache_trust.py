"""A lying mirror cannot poison the wheel caches. A range read verifies each
member against the central directory's CRC-32 and size, never the wheel's
sha256: so its members are cached under what was verified (the URL, the
length and the central directory this run's server answered), the central
directory is read again whenever an entry is built, another index is
configured or --refresh asks (a warm call from the same index asks nothing:
tests/test_warm_upstream.py), a scratch repository built by ranges always
says "member-crc", and --full-wheel builds it again from the whole,
sha256-checked wheel.

The lying mirror publishes the genuine wheel's sha256 and serves a copy whose
target member already carries the fix, its CRC-32 recomputed in both zip
headers (zipfile writes it so): read by ranges it says "already-applied",
where the genuine wheel says "applied". Servers are nginx on 127.0.0.1
(tools/setup); wheels are made here (our own fixture texts), except the
network-tagged case, which alters the published transformer-engine 2.20.2."""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from fixmono.apply.contract import apply_change
from fixmono.model.registry import discover
from fixmono.testing import REPO_ROOT, catalogue_tree, nginx, published_wheel, served, simple_index, write_wheel

pytestmark = pytest.mark.skipif(not Path("/usr/sbin/nginx").exists(), reason="nginx not installed (tools/setup)")

VERSION = "5.99.0"  # no such transformers release: only the indexes made here have it
PIN = "transformers-pin-moe-routing"
NETWORK = pytest.mark.skipif(os.environ.get("FIXMONO_NETWORK") != "1", reason="downloads a wheel (tag: network)")


def fixed(fix_id: str, files: dict[str, str | bytes]) -> dict[str, str]:
    """The fix's targets among `files` (repository paths), with the fix applied."""
    changes = [c for f in discover() if f.id == fix_id for c in f.changes if c.path in files]
    assert changes, fix_id
    return {c.path: apply_change(c, files[c.path] if isinstance(files[c.path], str) else files[c.path].decode()
                                 ).new_text for c in changes}


def wheels(folder: Path) -> tuple[Path, Path]:
    """(genuine, altered) transformers wheels of the same name: the altered
    one's PIN targets already carry the fix."""
    tree = catalogue_tree("transformers")
    files = {path.removeprefix("src/"): text for path, text in tree.items()}
    genuine = write_wheel(folder / "genuine", "transformers", VERSION, files)
    altered = write_wheel(folder / "altered", "transformers", VERSION,
                          {**files, **{p.removeprefix("src/"): t for p, t in fixed(PIN, tree).items()}})
    return genuine, altered


def lying_index(root: Path, genuine: Path, altered: Path) -> dict:
    """An index publishing the genuine wheel's sha256 that serves the altered one."""
    pip_env = simple_index(root, [genuine])
    shutil.copy(altered, root / "files" / genuine.name)
    return pip_env


def make_patch(base: str, pip_env: dict, cache: Path, *args: str, json_out: bool = True,
               spec: str = f"pip:transformers=={VERSION}"):
    env = {**os.environ, **pip_env, "PIP_INDEX_URL": f"{base}/simple", "FIXMONO_CACHE": str(cache)}
    env.pop("MAKE_PATCH_DEBUG", None)
    proc = subprocess.run([sys.executable, str(REPO_ROOT / "tools" / "make_patch"), "--all", "--upstream", spec,
                           "--check", *(["--json"] if json_out else []), *args],
                          capture_output=True, text=True, env=env, timeout=300)
    return proc, (json.loads(proc.stdout) if json_out and proc.stdout.strip() else {})


def status(data: dict, fix_id: str = PIN) -> str:
    return {r["fix"]: r["status"] for r in data["runs"][0]["results"]}[fix_id]


def wheel_requests(log: Path) -> list:
    return [r for r in served(log) if r[3].endswith(".whl")]


def forget_scratch(cache: Path) -> None:
    shutil.rmtree(cache / "upstreams", ignore_errors=True)


def test_a_lying_mirror_does_not_poison_another_servers_read(tmp_path):
    genuine, altered = wheels(tmp_path / "dist")
    lying = lying_index(tmp_path / "lying", genuine, altered)
    honest = simple_index(tmp_path / "honest", [genuine])
    cache = tmp_path / "cache"
    with nginx(tmp_path / "lying") as (base, _):
        proc, data = make_patch(base, lying, cache)
    assert proc.returncode == 0, proc.stderr
    assert status(data) == "already-applied" and data["runs"][0]["wheel"]["verified"] == "member-crc"
    forget_scratch(cache)  # the member cache stays
    with nginx(tmp_path / "honest") as (base, log):
        proc, data = make_patch(base, honest, cache)
        asked = wheel_requests(log)
    assert proc.returncode == 0, proc.stderr
    assert status(data) == "applied", data["runs"][0]
    assert asked, "the honest server was never asked"


def test_a_corrected_mirror_is_read_again_at_the_same_url(tmp_path):
    """The same URL, the genuine wheel served once the mirror is corrected:
    the central directory is read again and the altered member not reused."""
    genuine, altered = wheels(tmp_path / "dist")
    pip_env = lying_index(tmp_path / "www", genuine, altered)
    cache = tmp_path / "cache"
    with nginx(tmp_path / "www") as (base, _):
        proc, data = make_patch(base, pip_env, cache)
        assert proc.returncode == 0 and status(data) == "already-applied", proc.stderr
        shutil.copy(genuine, tmp_path / "www" / "files" / genuine.name)
        forget_scratch(cache)
        proc, data = make_patch(base, pip_env, cache)
    assert proc.returncode == 0, proc.stderr
    assert status(data) == "applied", data["runs"][0]


@pytest.mark.parametrize("then", ["another server", "the same url corrected"])
def test_a_lying_read_does_not_outlive_another_index_or_refresh_while_the_scratch_entry_is_kept(tmp_path, then):
    """upstreams/ kept: a range-read entry is used again only where the answer
    kept for the configured indexes is the central directory it was read from;
    another index is asked, and --refresh asks the same one again (one request)."""
    genuine, altered = wheels(tmp_path / "dist")
    lying = lying_index(tmp_path / "lying", genuine, altered)
    cache = tmp_path / "cache"
    with nginx(tmp_path / "lying") as (base, _):
        proc, data = make_patch(base, lying, cache)
        assert proc.returncode == 0 and status(data) == "already-applied", proc.stderr
        if then == "the same url corrected":
            shutil.copy(genuine, tmp_path / "lying" / "files" / genuine.name)
            proc, data = make_patch(base, lying, cache)  # a published release does not change: the kept answer
            assert proc.returncode == 0 and status(data) == "already-applied" and data["runs"][0]["wheel"]["cached"]
            proc, data = make_patch(base, lying, cache, "--refresh")
    if then == "another server":
        honest = simple_index(tmp_path / "honest", [genuine])
        with nginx(tmp_path / "honest") as (base, log):
            proc, data = make_patch(base, honest, cache)
            assert wheel_requests(log), "the honest server was never asked"
    assert proc.returncode == 0, proc.stderr
    assert status(data) == "applied" and not data["runs"][0]["wheel"]["cached"], data["runs"][0]


def test_a_kept_range_read_entry_costs_no_request_and_refresh_one_for_its_directory(tmp_path):
    genuine, _ = wheels(tmp_path / "dist")
    pip_env = simple_index(tmp_path / "www", [genuine])
    cache = tmp_path / "cache"
    with nginx(tmp_path / "www") as (base, log):
        assert make_patch(base, pip_env, cache)[0].returncode == 0
        first = len(wheel_requests(log))
        proc, data = make_patch(base, pip_env, cache)
        second = len(wheel_requests(log)) - first
        again, again_data = make_patch(base, pip_env, cache, "--refresh")
        third = len(wheel_requests(log)) - first - second
    assert proc.returncode == 0 and data["runs"][0]["wheel"]["cached"], proc.stderr
    assert again.returncode == 0 and again_data["runs"][0]["wheel"]["cached"], again.stderr
    assert (second, third) == (0, 1), (first, second, third)


def test_unchanged_members_come_from_the_cache_checked_against_this_runs_directory(tmp_path):
    genuine, _ = wheels(tmp_path / "dist")
    pip_env = simple_index(tmp_path / "www", [genuine])
    cache = tmp_path / "cache"
    with nginx(tmp_path / "www") as (base, log):
        assert make_patch(base, pip_env, cache)[0].returncode == 0
        first = len(wheel_requests(log))
        forget_scratch(cache)
        proc, data = make_patch(base, pip_env, cache)
        second = len(wheel_requests(log)) - first
    assert proc.returncode == 0, proc.stderr
    wheel = data["runs"][0]["wheel"]
    assert second == 1 and wheel["requests"] == 1, (first, second)  # the end records with the directory: no member
    assert wheel["cached_members"] >= 1 and wheel["verified"] == "member-crc" and not wheel["cached"], wheel


def provenance_file(cache: Path) -> Path:
    (entry,) = (cache / "upstreams").iterdir()
    return entry / ".git" / "fixmono-wheel.json"


def edit_provenance(cache: Path, edit) -> None:
    path = provenance_file(cache)
    data = json.loads(path.read_text())
    edit(data)
    path.write_text(json.dumps(data))


def claim_sha256(data: dict) -> None:
    data["wheel"].update(verified="sha256", sha256=data["wheel"]["published_sha256"])


def claim_full(data: dict) -> None:
    data["wheel"].update(read="full", verified="sha256")  # no sha256 of the whole: not what a full read records


def member_hash_a_number(data: dict) -> None:
    data["members"] = {path: 5 for path in data["members"]}


def root_a_number(data: dict) -> None:
    data["wheel"]["wheel_root"] = 5


def members_a_list(data: dict) -> None:
    data["members"] = list(data["members"])


@pytest.mark.parametrize("edit", [claim_sha256, claim_full, member_hash_a_number, root_a_number, members_a_list],
                         ids=lambda e: e.__name__)
def test_a_scratch_entry_never_reads_better_than_its_read_and_a_wrong_shape_is_rebuilt(tmp_path, edit):
    genuine, _ = wheels(tmp_path / "dist")
    pip_env = simple_index(tmp_path / "www", [genuine])
    cache = tmp_path / "cache"
    with nginx(tmp_path / "www") as (base, _):
        assert make_patch(base, pip_env, cache)[0].returncode == 0
        edit_provenance(cache, edit)
        proc, data = make_patch(base, pip_env, cache)
    assert proc.returncode == 0, proc.stderr
    wheel = data["runs"][0]["wheel"]
    assert (wheel["read"], wheel["verified"], wheel["sha256"], wheel["cached"]) == ("range", "member-crc", None, False)
    assert status(data) == "applied"
    assert json.loads(provenance_file(cache).read_text())["wheel"]["verified"] == "member-crc"


def test_a_cached_read_says_so_and_full_wheel_replaces_it(tmp_path):
    genuine, _ = wheels(tmp_path / "dist")
    pip_env = simple_index(tmp_path / "www", [genuine])
    cache = tmp_path / "cache"
    with nginx(tmp_path / "www") as (base, _):
        assert make_patch(base, pip_env, cache)[0].returncode == 0
        proc, data = make_patch(base, pip_env, cache)
        table = make_patch(base, pip_env, cache, json_out=False)[0]
        full, full_data = make_patch(base, pip_env, cache, "--full-wheel")
        again, again_data = make_patch(base, pip_env, cache)
    assert proc.returncode == table.returncode == full.returncode == again.returncode == 0
    wheel = data["runs"][0]["wheel"]
    assert (wheel["read"], wheel["verified"], wheel["cached"]) == ("range", "member-crc", True), wheel
    assert "by an earlier run (cached); verified: member-crc" in table.stdout, table.stdout
    wheel = full_data["runs"][0]["wheel"]
    assert (wheel["read"], wheel["verified"], wheel["cached"]) == ("full", "sha256", False), wheel
    wheel = again_data["runs"][0]["wheel"]  # the whole wheel's entry serves later runs, as verified as it was
    assert (wheel["read"], wheel["verified"], wheel["cached"]) == ("full", "sha256", True), wheel


def test_full_wheel_refuses_the_lying_mirrors_wheel_after_a_range_read(tmp_path):
    genuine, altered = wheels(tmp_path / "dist")
    pip_env = lying_index(tmp_path / "www", genuine, altered)
    cache = tmp_path / "cache"
    with nginx(tmp_path / "www") as (base, _):
        proc, data = make_patch(base, pip_env, cache)
        assert proc.returncode == 0 and status(data) == "already-applied", proc.stderr
        full, _ = make_patch(base, pip_env, cache, "--full-wheel")
    assert full.returncode == 2 and len(full.stderr.strip().splitlines()) == 1, full.stderr
    assert "sha256" in full.stderr, full.stderr


# --- the case, on the published transformer-engine 2.20.2 -------------------------------------------

TE_VERSION = "2.20.2"
TE_FIX = "te-rocm-unfused-bias-grad-fp32-wgrad"


@NETWORK
def test_the_published_transformer_engine_wheel_altered_by_a_lying_mirror(tmp_path):
    published = published_wheel("transformer-engine", TE_VERSION)
    with zipfile.ZipFile(published) as zf:
        members = [(info, zf.read(info)) for info in zf.infolist()]
    changed = fixed(TE_FIX, {info.filename: data for info, data in members})  # the wheel's root is the repository's
    altered = tmp_path / "altered" / published.name
    altered.parent.mkdir()
    with zipfile.ZipFile(altered, "w", zipfile.ZIP_DEFLATED) as zf:  # CRC-32 recomputed in both headers
        for info, data in members:
            zf.writestr(info, changed.get(info.filename, data))
    pip_env = lying_index(tmp_path / "lying", published, altered)
    honest = simple_index(tmp_path / "honest", [published])
    cache, spec = tmp_path / "cache", f"pip:transformer-engine=={TE_VERSION}"
    with nginx(tmp_path / "lying") as (base, _):
        proc, data = make_patch(base, pip_env, cache, spec=spec)
    assert proc.returncode == 0, proc.stderr
    assert (status(data, TE_FIX), data["runs"][0]["wheel"]["verified"]) == ("already-applied", "member-crc")
    forget_scratch(cache)
    with nginx(tmp_path / "honest") as (base, _):
        proc, data = make_patch(base, honest, cache, spec=spec)
    assert proc.returncode == 0, proc.stderr
    assert status(data, TE_FIX) == "applied", data["runs"][0]
