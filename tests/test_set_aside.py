"""The Python engine sets aside the defs and classes a transformation cannot
read (its `mentioning` pattern is not in their text) before libcst parses the
file, and puts them back after: the result, the counts and the errors must be
exactly those of the whole file. Checked on every case and fixture of the
catalogue, on the upstream files installed in this environment (real text,
read at test time), and on a generated class of sources (decorators, nested
classes, async defs, CRLF, a lone CR, no final newline, comments after a body,
form feeds, tabs) under transformations that edit inside a def, add at the end
of the module, add before a def, and drop statements."""
import itertools

import libcst as cst
import pytest

from fixmono.engines import python as engine
from fixmono.model.errors import NotApplicable, TargetSyntaxError, TransformFailed
from fixmono.model.projects import PROJECTS
from fixmono.model.registry import discover
from fixmono.sources.installed import installed_path
from fixmono.testing import change_for, fixture_changes, for_fix

ERRORS = (NotApplicable, TargetSyntaxError, TransformFailed)


def outcome(transform, text, prune):
    try:
        return transform._rewrite(text, prune=prune)
    except ERRORS as err:
        return (type(err).__name__, str(err))


def pruning(change) -> bool:
    return isinstance(change.transform, engine.PythonTransform) and bool(change.transform._make().mentioning)


CATALOGUE = [(f"{fix.id}: case {case.name}", change_for(fix, case), case.before) for fix in discover()
             for case in fix.cases] + \
            [(f"{fix.id}: fixture of {change.path}", change, fix.fixture_text(change))
             for fix, change in fixture_changes()]
CATALOGUE = [item for item in CATALOGUE if pruning(item[1])]
INSTALLED = [(f"{fix.id}: installed {change.path}", change, path) for fix in discover() for change in fix.changes
             if pruning(change) and (path := installed_path(PROJECTS[fix.upstream], change.path)) and path.is_file()]


def test_every_transformer_of_the_catalogue_says_what_it_reads():
    """A hand-written transformer declares `mentioning` in its own class body: a pattern, or None with the reason
    in a comment (it reads the whole module). Without it, its whole target is parsed by libcst on every cold
    `status`: about 0.5-1 s for a 5,000-line file, most of the 3 s the catalogue has."""
    import ast
    from fixmono.testing import REPO_ROOT
    silent = []
    for path in sorted((REPO_ROOT / "fixes").glob("*/*/*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ClassDef) and any(getattr(b, "id", None) in ("SiteTransformer", "LinePlanTransformer")
                                                      for b in node.bases):
                declared = any(isinstance(s, (ast.Assign, ast.AnnAssign)) and "mentioning" in ast.unparse(s).split("=")[0]
                               for s in node.body)
                if not declared:
                    silent.append(f"{path.relative_to(REPO_ROOT)}: {node.name}")
    assert not silent, silent


def test_the_catalogue_sets_aside_in_most_of_its_python_transformations():
    assert len({name.split(":")[0] for name, _, _ in CATALOGUE}) >= 9
    assert len(CATALOGUE) > 30, len(CATALOGUE)


@pytest.mark.parametrize("name, change, text", [for_fix(item[0].split(":")[0], *item, id=item[0]) for item in CATALOGUE])
def test_catalogue_inputs_give_what_the_whole_file_gives(name, change, text):
    assert outcome(change.transform, text, True) == outcome(change.transform, text, False)


@pytest.mark.parametrize("name, change, path", [for_fix(item[0].split(":")[0], *item, id=item[0]) for item in INSTALLED])
def test_installed_upstream_files_give_what_the_whole_file_gives(name, change, path):
    text = path.read_text(encoding="utf-8")
    assert outcome(change.transform, text, True) == outcome(change.transform, text, False)


def test_the_installed_trainer_is_mostly_set_aside():
    """The point of it: libcst sees Trainer.compute_loss, not the 5,000-line file."""
    rows = [(change, path) for name, change, path in INSTALLED if path.name == "trainer.py"]
    if not rows:
        pytest.skip("transformers is not installed here")
    change, path = rows[0]
    text = path.read_text(encoding="utf-8")
    aside = engine.SetAside(text, engine.check_syntax(text), change.transform._make().mentioning)
    assert len(aside.text) < len(text) / 5 and aside.kept
    assert "def compute_loss(" in aside.text


# --- a generated class of sources ----------------------------------------------------------------------------

class RenameInTarget(engine.LinePlanTransformer):
    """Edits a statement of `Box.target` (or the module's `target`)."""
    mentioning = r"\btarget\b"

    def targets(self, qualname):
        return qualname.split(".")[-1] == "target"

    def plan(self, function):
        self.anchors += 1
        lines = engine.find_all(function, cst.SimpleStatementLine)
        if any("fixed" in engine.code(line) for line in lines):
            self.found("target")
            return {}
        self.change("target")
        return {lines[0]: cst.parse_statement("fixed = True\n")}


class AppendAtEnd(engine.SiteTransformer):
    mentioning = r"\badded\b"

    def leave_Module(self, original, updated):
        self.anchors += 1
        if any(isinstance(s, cst.FunctionDef) and s.name.value == "added" for s in updated.body):
            self.found("added")
            return updated
        self.change("added")
        return updated.with_changes(body=[*updated.body, cst.parse_statement("def added():\n    return 1\n")])


class InsertBeforeTarget(engine.SiteTransformer):
    mentioning = r"\btarget\b"

    def leave_Module(self, original, updated):
        body = list(updated.body)
        at = [i for i, s in enumerate(body) if isinstance(s, (cst.FunctionDef, cst.ClassDef))
              and "target" in engine.code(s)]
        if not at:
            return updated
        self.anchors += 1
        if "MARK = 1" in updated.code:
            self.found("mark")
            return updated
        self.change("mark")
        body.insert(at[0], cst.parse_statement("MARK = 1\n"))
        return updated.with_changes(body=body)


class DropPasses(engine.SiteTransformer):
    """Drops every module-level `pass`: the set-aside lines too (the engine must notice)."""
    mentioning = r"\btarget\b"

    def leave_Module(self, original, updated):
        self.anchors += 1
        body = [s for s in updated.body if not (isinstance(s, cst.SimpleStatementLine)
                                                and isinstance(s.body[0], cst.Pass))]
        if len(body) == len(updated.body):
            self.found("no pass")
            return updated
        self.change("no pass")
        return updated.with_changes(body=body)


TRANSFORMERS = [RenameInTarget, AppendAtEnd, InsertBeforeTarget, DropPasses]

PIECES = {
    "plain": "def other(a):\n    return a\n",
    "decorated": "@decorator(\n    1,\n)\n@other\ndef helper():\n    x = 1\n    return x\n",
    "async": "async def fetch():\n    await thing()\n",
    "class": "class Other:\n    \"\"\"Doc.\"\"\"\n\n    def method(self):\n        return 2\n\n    class Inner:\n        y = 3\n",
    "box": "class Box:\n    size = 1\n\n    def before(self):\n        return 0\n\n    @staticmethod\n"
           "    def target():\n        value = 1\n        return value\n\n    def after(self):\n        pass\n"
           "        # a comment after the body\n",
    "target": "def target():\n    value = 2\n    return value\n",
    "comment-after": "def trailing():\n    return 1\n    # still indented\n# at the margin\n",
    "comment-gap": "class Gapped:\n    def last(self):\n        return 1\n\n        # after a blank line\n\n"
                   "    # at the class's level\n",
    "formfeed": "\x0c\ndef paged():\n    return 5\n",
    "tabs": "def tabbed():\n\tif True:\n\t\treturn 1\n",
    "oneline": "class Tiny: pass\n",
    "statements": "import os\nVALUE = os.sep\nif VALUE:\n    def conditional():\n        return target\n",
}


def sources():
    names = list(PIECES)
    for n, combo in enumerate(itertools.combinations(names, 4)):
        text = "\n\n".join(PIECES[name] for name in combo)
        ending = ["\n", "\r\n"][n % 2]
        text = text.replace("\n", ending)
        if n % 3 == 0:
            text = text.rstrip("\r\n")  # no newline at the end
        yield f"{'+'.join(combo)}{' crlf' if n % 2 else ''}{' no-eol' if n % 3 == 0 else ''}", text
    yield "lone CR", "def target():\r    value = 1\r    return value\rdef other():\r    return 2\r"


def edge_sources():
    """Files whose line ends, indents and trailing lines decide what libcst does with added code (a review's
    findings): each must give what the whole file gives."""
    body = "def target():\n    value = 1\n    return value\n"
    yield "first block indented 2", "def helper(x):\n  return x\n\n\n" + body
    yield "first block indented by a tab", "def helper(x):\n\treturn x\n\n\n" + body
    yield "first line CRLF, the rest LF", "def helper(x):\r\n    return x\n\n\n" + body
    yield "a form feed before a member", "class Box:\n    size = 2\n\x0c    def other(self):\n        return 1\n\n" \
                                         "    def target(self):\n        value = 1\n        return value\n"
    yield "a form feed before a def", "import os\n\x0cdef helper():\n    return 1\n\n\n" + body
    for name, tail in [("a comment shallower than the body", "  # c\n"),
                       ("a margin comment, then a deeper one", "# margin\n    # deeper\n"),
                       ("a whitespace-only line", "    \n"), ("a short whitespace-only line", "  \n"),
                       ("blank, deeper, blank", "\n    # deeper\n\n"), ("deeper, then the margin", "    # d\n# m\n")]:
        for after in ("", "\n\nx = 1\n", "\n\n" + body):
            yield f"{name} after the last def{' + more' * bool(after)}", \
                "import os\n\n\n" + body.replace("target", "first") + tail + after
            yield f"{name} after a member{' + more' * bool(after)}", \
                "class Box:\n    def first(self):\n        return 1\n" + tail.replace("\n    ", "\n        ") + \
                "    def target(self):\n        return None\n" + after
    yield "a one-line def then a comment", "import os\ndef one(): return 1\n    # deeper\n\n" + body


SOURCES = list(sources()) + list(edge_sources())


@pytest.mark.parametrize("make", TRANSFORMERS, ids=[t.__name__ for t in TRANSFORMERS])
def test_generated_sources_give_what_the_whole_file_gives(make):
    transform = engine.PythonTransform(make, make.__name__, "a site")
    differ = [name for name, text in SOURCES
              if outcome(transform, text, True) != outcome(transform, text, False)]
    assert not differ, differ[:5]
    assert len(SOURCES) > 300


def test_a_set_aside_def_libcst_cannot_visit_is_no_longer_in_the_way():
    """The one difference, on purpose: an expression nested deeper than libcst's visit can go, in a def the
    transformation does not read, failed the whole file; set aside, the rest is transformed and that def comes
    back byte for byte."""
    deep = "def other():\n    return x" + ".a" * 1000 + "\n"
    text = "def first():\n    return 1\n\n\n" + deep + "\n\ndef target():\n    value = 1\n    return None\n"
    transform = engine.PythonTransform(RenameInTarget, "rename", "a site")
    assert outcome(transform, text, False) == ("TargetSyntaxError", "Python expressions nested too deeply to transform")
    result = outcome(transform, text, True)
    assert result.changed == 1 and deep in result.source and "fixed = True" in result.source


def test_generated_sources_are_set_aside_where_they_can_be():
    aside = [engine.SetAside(text, engine.check_syntax(text), RenameInTarget.mentioning) for _, text in SOURCES]
    assert sum(bool(a.kept) for a in aside) > 250
    for (name, text), a in zip(SOURCES, aside):
        assert a.restore(a.text) == text, name  # nothing changed: the same text comes back
        if name == "lone CR":
            assert not a.kept  # ast and lines_of would count its lines apart: the whole file is parsed
