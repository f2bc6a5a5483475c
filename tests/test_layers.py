"""The package is laid out as the stages a fix goes through (fixmono/__init__.py):
each stage imports only the stages before it, the command line is imported by
nothing, nothing has an import cycle, and a make_patch run calls only
downwards. Read from the source, the way the one-git-layer test reads it."""
from __future__ import annotations

import ast
import sys
from pathlib import Path


import fixmono
from fixmono.testing import REPO_ROOT, make_repo
from tests.helpers import pytorch_files

STAGES = ("model", "sources", "engines", "apply", "output", "runtime", "analysis", "cli")
BESIDE = {"bench": "runtime", "testing": "analysis"}  # beside the stages: may import up to this one
PACKAGE = Path(fixmono.__file__).absolute().parent
CATALOGUE = REPO_ROOT / "fixes"


def module_name(path: Path, root: Path, prefix: str = "") -> str:
    """The dotted name of `path` below `root` (a folder that is on sys.path, or `prefix`)."""
    parts = path.relative_to(root).with_suffix("").parts
    return ".".join(filter(None, (prefix, *parts))).removesuffix(".__init__")


def imports(path: Path, name: str) -> set[str]:
    """The fixmono modules `path` (module `name`) imports, anywhere in it
    (function-level imports count too); `from pkg import mod` names the module."""
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            found |= {a.name for a in node.names}
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join(anchor + ([base] if base else []))
            found |= {f"{base}.{a.name}" for a in node.names} | {base}
    return {m for m in found if m == "fixmono" or m.startswith("fixmono.")}


def graph(sources: dict[str, Path]) -> dict[str, set[str]]:
    """module -> the modules of `sources` it imports (a name that is not a
    module, `from fixmono.model.fix import Fix`, counts as its module)."""
    out = {}
    for name, path in sources.items():
        targets = set()
        for imported in imports(path, name):
            while imported and imported not in sources:
                imported = imported.rpartition(".")[0]
            if imported and imported != name:
                targets.add(imported)
        out[name] = targets
    return out


def part(module: str) -> str:
    """The stage (or part beside the stages) a fixmono module belongs to."""
    if module == "fixmono.__main__":  # `python -m fixmono`: the console script, so the command line
        return "cli"
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else "fixmono"


def rank(p: str) -> float:
    return STAGES.index(BESIDE.get(p, p)) + (0.5 if p in BESIDE else 0) if p in STAGES or p in BESIDE else -1


def violations(edges: dict[str, set[str]]) -> list[str]:
    """Every import that breaks the layering."""
    bad = []
    for source, targets in edges.items():
        here = part(source)
        for target in targets:
            there = part(target)
            if here == "fixes":
                test = source.rpartition(".")[2].startswith("test_")
                if there in ("cli", "analysis") or (there == "testing" and not test):
                    bad.append(f"{source} -> {target}: a fix uses the model, sources, engines, apply, runtime, bench")
            elif there == "fixes":
                bad.append(f"{source} -> {target}: the framework finds fixes by discovery, never by import")
            elif there == "fixmono":
                continue  # the package's own __init__ (the catalogue's mapping), below everything
            elif here == "fixmono":
                bad.append(f"{source} -> {target}: the package root imports no stage")
            elif there == "cli" and here != "cli":
                bad.append(f"{source} -> {target}: nothing imports the command line")
            elif there in BESIDE and here not in BESIDE and here != "cli":
                bad.append(f"{source} -> {target}: the stages do not import {there}")
            elif rank(there) > rank(here):
                bad.append(f"{source} -> {target}: {here} may not import {there}, a later stage")
    return sorted(bad)


def cycles(edges: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan)."""
    index, low, stack, on, found = {}, {}, [], set(), []

    def visit(v):
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in edges.get(v, ()):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for v in sorted(edges):
        if v not in index:
            visit(v)
    return found


def package_sources(package: Path = PACKAGE, catalogue: Path | None = CATALOGUE) -> dict[str, Path]:
    sources = {module_name(p, package.parent): p for p in package.rglob("*.py")}
    if catalogue is not None:
        sources |= {module_name(p, catalogue, "fixmono.fixes"): p for p in catalogue.rglob("*.py")
                    if "fixtures" not in p.parts}
    return sources


def test_every_stage_is_a_folder_that_says_what_it_owns_and_may_import():
    for stage in STAGES:
        doc = ast.get_docstring(ast.parse((PACKAGE / stage / "__init__.py").read_text()))
        assert doc and "import" in doc, f"{stage}/__init__.py must say what it owns and what it may import"
    assert {p.name for p in PACKAGE.iterdir() if p.is_dir() and p.name != "__pycache__"} == {*STAGES, *BESIDE} - {"testing"}


def test_imports_follow_the_stages():
    assert violations(graph(package_sources())) == []


def test_no_import_cycles():
    assert cycles(graph(package_sources())) == []


def test_the_checks_catch_an_upward_import_and_a_cycle(tmp_path):
    """The checks above can fail: a package where sources imports apply, and
    two modules of apply import each other."""
    root = tmp_path / "fixmono"
    files = {"__init__.py": "", "sources/__init__.py": "", "sources/git.py": "from fixmono.apply.a import x\n",
             "apply/__init__.py": "", "apply/a.py": "from . import b\nx = 1\n",
             "apply/b.py": "def f():\n    from fixmono.apply.a import x\n",
             "output/__init__.py": "", "output/w.py": "import fixmono.cli.main\n",
             "cli/__init__.py": "", "cli/main.py": ""}
    for name, text in files.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(text)
    edges = graph(package_sources(root, None))
    assert violations(edges) == ["fixmono.output.w -> fixmono.cli.main: nothing imports the command line",
                                 "fixmono.sources.git -> fixmono.apply.a: sources may not import apply, a later stage"]
    assert cycles(edges) == [["fixmono.apply.a", "fixmono.apply.b"]]


def test_a_make_patch_run_calls_only_downwards(tmp_path, capsys):
    """From `--upstream` to the written patch, every call between stages goes
    to the same or an earlier stage (callbacks the command line hands down,
    such as its progress printer, excepted): no stage returns to one it left."""
    from fixmono.cli import make_patch

    repo = make_repo(tmp_path / "pytorch", pytorch_files())
    upward, visited = [], []

    def stage_of(code) -> str | None:
        name = code.co_filename
        if not name.startswith(str(PACKAGE)):
            return None
        p = Path(name).relative_to(PACKAGE).parts[0]
        return p if p in STAGES else None

    def profile(frame, event, arg):
        if event != "call" or frame.f_back is None:
            return
        callee, caller = stage_of(frame.f_code), stage_of(frame.f_back.f_code)
        if callee and caller and callee != caller:
            visited.append(callee)
            handed_down = "<locals>" in frame.f_code.co_qualname or frame.f_code.co_name == "<lambda>"
            if rank(callee) > rank(caller) and not handed_down:
                upward.append(f"{caller} -> {callee}.{frame.f_code.co_qualname}")

    sys.setprofile(profile)
    try:
        code = make_patch.main(["--all", "--upstream", str(repo), "--out", str(tmp_path / "series")])
    finally:
        sys.setprofile(None)
    assert code == 0, capsys.readouterr().err
    assert upward == []
    for stage in ("sources", "engines", "apply", "output"):
        assert stage in visited, f"the run never reached {stage}"
