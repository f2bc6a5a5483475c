"""fixmono: fixes for GPU ML frameworks, as patches, patched wheels and hot-fixes.

The package is laid out as the stages a fix goes through; each stage may
import the stages before it and none after (tests/test_layers.py checks it):

    model     what a fix is: the declaration, statuses, errors, projects, the catalogue
    sources   where upstream text comes from: checkouts, wheels, remotes, installed
              files, and the one git layer
    engines   the transformations: libcst (Python) and tree-sitter (C++)
    apply     a fix on a source: match contract, presence, reverts, validation, `run`
    output    what is written: patch series, branches, patched wheels, patched
              environments (and their journal)
    runtime   what fixes use when they run: hot-fixes, reproducer helpers
    analysis  what the catalogue means for versions and environments: drift, history,
              still-needed, status
    cli       the command lines: arguments, rendering, exit codes (nothing imports it)

Beside them: fixmono.fixes (the catalogue, one folder per fix), bench (GPU
timing, checkpoint comparison) and testing (helpers of the tests).
"""
import importlib.util as _util
import os as _os
import sys as _sys

__version__ = "0.1.0"


def _catalogue_from_repository() -> None:
    """In the repository the catalogue is the top-level fixes/ folder, beside
    tools/fixmono/; the wheel carries it as fixmono/fixes/. Either way it
    imports as fixmono.fixes."""
    here = _os.path.dirname(_os.path.abspath(__file__))
    if _os.path.isdir(_os.path.join(here, "fixes")):
        return
    folder = _os.path.join(_os.path.dirname(_os.path.dirname(here)), "fixes")
    init = _os.path.join(folder, "__init__.py")
    if not _os.path.isfile(init):
        return
    spec = _util.spec_from_file_location(f"{__name__}.fixes", init, submodule_search_locations=[folder])
    module = _util.module_from_spec(spec)
    _sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    globals()["fixes"] = module


_catalogue_from_repository()
