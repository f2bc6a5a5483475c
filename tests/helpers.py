"""Shared pieces of the cross-cutting tests: a small PyTorch-shaped checkout,
with the batchnorm fix's fixture as the sample target, and a throwaway fix
(tests of the framework use it, not a real fix)."""
from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

from fixmono.testing import REPO_ROOT
from fixmono.testing import make_patch, make_repo  # noqa: F401 (make_patch: tests import it from here)

FIXTURE = REPO_ROOT / "fixes/pytorch/batchnorm_negative_running_var/fixtures/test_jit_fuser_te.py"
BN_FIX = "pytorch-batchnorm-negative-running-var"


def pytorch_files(test_file: str | bytes | None = None) -> dict:
    """The files of a tiny PyTorch-shaped checkout."""
    return {"torch/__init__.py": "__version__ = '0.0'\n",
            "test/test_jit_fuser_te.py": FIXTURE.read_text() if test_file is None else test_file}


def pytorch_repo(path: Path, **kw) -> Path:
    return make_repo(path, pytorch_files(**kw))


THROWAWAY = {

    "__init__.py": "",
    "BUILD.bazel": 'load("//tools:defs.bzl", "fix_module")\n\nfix_module()\n',
    "transform.py": '''\
        """Make fill_value() return 0.0 instead of None (a throwaway example)."""
        import libcst as cst

        from fixmono.engines.python import PythonTransform, SiteTransformer


        class FillValue(SiteTransformer):
            def visit_FunctionDef(self, node):
                super().visit_FunctionDef(node)
                if self.qualname == "fill_value":
                    self.anchors += 1
                return True

            def leave_Return(self, original, updated):
                if self.qualname != "fill_value":
                    return updated
                if isinstance(updated.value, cst.Float):
                    self.present += 1
                    return updated
                if isinstance(updated.value, cst.Name) and updated.value.value == "None":
                    self.changed += 1
                    return updated.with_changes(value=cst.Float("0.0"))
                self.problems.append("fill_value returns something else")
                return updated


        TRANSFORM = PythonTransform(FillValue, "fill_value() returns 0.0", "function fill_value")
        ''',
    "fix.py": '''\
        from fixmono.model import Case, Dep3, FileChange, Fix, Fixture

        from .transform import TRANSFORM

        FIX = Fix(
            id="{fix_id}",
            title="fill_value: return 0.0, not None",
            upstream="{upstream}",
            description="A throwaway fix written by a test of the framework.",
            dep3=Dep3(origin="vendor", last_update="2026-11-23"),
            backends=("cpu",),
            changes=(FileChange("{target}", TRANSFORM, sites=1,
                                fixture=Fixture("fixtures/_throwaway.py", mutate=("fill_value",),
                                                edit="replace")),),
            cases=(Case("returns None", before="def fill_value():\\n    return None\\n",
                        after="def fill_value():\\n    return 0.0\\n"),
                   Case("already 0.0", before="def fill_value():\\n    return 0.0\\n", expect="already-applied")),
        )
        ''',
    "fixtures/_throwaway.py": '''\
        def fill_value():
            x = 1
            return None


        def other():
            return None
        ''',
}


def with_environ(marker: str) -> list[int]:
    """pids of processes whose environment holds `marker` (a test's mark on what it started)."""
    found = []
    for proc in Path("/proc").iterdir():
        if proc.name.isdigit() and int(proc.name) != os.getpid():
            try:
                if marker.encode() in (proc / "environ").read_bytes():
                    found.append(int(proc.name))
            except OSError:
                continue
    return found


def throwaway_fix(upstream: str, fix_id: str, target: str, repro: str | None = None, needs: str = "cpu") -> dict[str, str]:
    """The files of a throwaway fix folder that makes fill_value() in `target`
    return 0.0 instead of None, exactly as a contributor following README
    "Adding a fix" writes them; with `repro` (repro.py's text), a reproducer
    that runs on `needs` (Fix.repro_needs)."""
    fill = {"{upstream}": upstream, "{fix_id}": fix_id, "{target}": target}
    out = {}
    for name, text in THROWAWAY.items():
        for key, value in fill.items():
            text = text.replace(key, value)
        out[name] = textwrap.dedent(text)
    if repro is not None:
        out["repro.py"] = textwrap.dedent(repro)
        out["fix.py"] = "from fixmono.model.fix import lazy\n" + out["fix.py"].replace(
            'backends=("cpu",),', f'backends=("cpu",), repro_needs="{needs}", reproduce=lazy(f"{{__package__}}.repro:reproduce"),')
    return out


def tree_with_fixes(dest: Path, fixes: dict[str, dict[str, str]]) -> Path:
    """A copy of this tree (copy_tree) with these fix folders added: {"fixes/<project>/<name>": files}.
    Run its commands with tree_env(): a framework test's own fixes, not the catalogue's."""
    root = copy_tree(dest)
    for folder, files in fixes.items():
        for name, text in files.items():
            (root / folder / name).parent.mkdir(parents=True, exist_ok=True)
            (root / folder / name).write_text(text)
    return root


def tree_env(root: Path, **extra: str) -> dict[str, str]:
    """The environment of a command of the copy `root`: its fixmono and its fixes (not this tree's)."""
    from fixmono.runtime.child import child_env
    env = {**child_env(), "PYTHONPATH": f"{root / 'tools'}{os.pathsep}{root}", **extra}
    env.pop("XML_OUTPUT_FILE", None)  # an inner pytest must not overwrite Bazel's report
    return env


def run_killed_at(point: str, tmp_path: Path, *args: str, module: str = "fixmono.cli.make_patch") -> None:
    """`python -m module args`, SIGKILLed once it reports reaching `point`
    (scratch.pause_point; asserted)."""
    reached = tmp_path / "reached"
    proc = subprocess.Popen([sys.executable, "-m", module, *args],
                            env={**os.environ, "PYTHONPATH": str(REPO_ROOT / "tools"), "FIXMONO_PAUSE_AT": point,
                                 "FIXMONO_PAUSE_FILE": str(reached)},
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 120
    while not reached.exists() and proc.poll() is None and time.monotonic() < deadline:
        time.sleep(0.01)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    assert reached.exists() and reached.read_text() == point, f"the run never reached {point}"
    reached.unlink()


COPY_SKIP = {".venv", ".cache", ".git", "__pycache__", ".hypothesis", "out", "patches-out"}


def copy_tree(dest: Path) -> Path:
    """A copy of this tree (no venv, git or build outputs): a test adds a throwaway fix folder to it."""
    shutil.copytree(REPO_ROOT, dest, symlinks=False,
                    ignore=lambda d, names: [n for n in names if n in COPY_SKIP or n.startswith("bazel-")])
    return dest


# A user's patch on a transformers-shaped module of our own (patch-wheel --diff, drift --diff)
TF_PATH = "transformers/fixmono_example.py"
TF_TEXT = """import math


class Scheduler:
    def factor(self, step):
        if step < self.warmup:
            return step / self.warmup
        return 1.0
"""
TF_DIFF = """From: A User <user@example.com>
Subject: [PATCH] Scheduler: no division by zero

--- a/src/transformers/fixmono_example.py
+++ b/src/transformers/fixmono_example.py
@@ -4,4 +4,4 @@ class Scheduler:
     def factor(self, step):
         if step < self.warmup:
-            return step / self.warmup
+            return step / max(1, self.warmup)
         return 1.0
"""


# The runtime hot-fixes in a fresh venv (tests/test_diff_hotfix.py, tests/test_hotfix_holes.py)
def unified_diff(before: str, after: str, path: str) -> str:
    import difflib

    return "".join(difflib.unified_diff(before.splitlines(True), after.splitlines(True), f"a/{path}", f"b/{path}"))


def hotfix_venv(root: Path, transformers: dict[str, str]) -> Path:
    """A fresh venv's python: our own `transformers` package (`transformers`: file
    name -> text) in its site-packages, fixmono and its libraries after it (a
    .pth), and the start-up hook the wheel installs."""
    import ast
    import sysconfig
    import venv

    venv.create(root / "venv", with_pip=False)
    python = root / "venv" / "bin" / "python"
    site = Path(subprocess.run([python, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                               capture_output=True, text=True, check=True).stdout.strip())
    (site / "transformers").mkdir()
    for name, text in {"__init__.py": "", **transformers}.items():
        (site / "transformers" / name).write_text(text)
    (site / "zz-fixmono-paths.pth").write_text(f"{REPO_ROOT / 'tools'}\n{REPO_ROOT}\n{sysconfig.get_paths()['purelib']}\n")
    setup = ast.parse((REPO_ROOT / "setup.py").read_text())
    pth = ast.literal_eval(next(n.value for n in setup.body if isinstance(n, ast.Assign)
                                and getattr(n.targets[0], "id", "") == "PTH"))
    (site / "zzz-fixmono-hotfixes.pth").write_text(pth)  # the line the wheel installs
    return python


def run_python(python: Path, code: str, **env) -> subprocess.CompletedProcess:
    """`python -c code` with no PYTHON* or FIXMONO_* variable of ours, and `env` added."""
    clean = {k: v for k, v in os.environ.items() if not k.startswith(("PYTHON", "FIXMONO_"))}
    return subprocess.run([python, "-c", code], capture_output=True, text=True, env={**clean, **env}, timeout=300)


# A loader module with two methods alike (our own): a fix made on main changes a line of the first; the
# release moved on around it, in both methods (what a hunk-only port must refuse: which method of Loader?).
LOADER_BASE = '''"""Our own loader module."""
import os


class Loader:
    def load(self, path):
        self.count += 1
        self.seen.add(path)
        data = read(path)
        if data is None:
            return None
        return decode(data)

    def load_all(self, paths):
        self.count += len(paths)
        self.seen.update(paths)
        data = read(paths)
        if data is None:
            return None
        return decode(data)


def read(path, retries=1):
    return os.environ.get(path)


def decode(data, strict=False):
    return data
'''
LOADER_FIX = ("        data = read(path)\n        if data is None:\n", "        data = read(path)\n        if not data:\n")
# the release moved on: the lines around the fix's changed line differ, in both methods (what a hunk-only port
# must refuse: what is left of its context is in both, under git's header `class Loader:`)
LOADER_RELEASE = LOADER_BASE.replace("        data = read(path)\n", "        data = read(path, retries=3)\n").replace(
    "        data = read(paths)\n", "        data = read(paths, retries=3)\n").replace(
    "        return decode(data)\n", "        return decode(data, strict=True)\n")
