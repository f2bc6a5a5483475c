"""Stage 1, model: what a fix is. The declaration a fix.py writes (Fix,
FileChange, Case, Fixture, Dep3, HotFix, ...), the statuses and outcomes of
applying it, the errors every stage raises, the upstream projects, and the
catalogue (discovery of fixmono.fixes). Imports nothing of fixmono above it.

Fix authors import the declaration from here: `from fixmono.model import Fix, ...`.
"""
from fixmono.model.errors import (FixDeclarationError, FixtureUnavailable, NotApplicable,
                                  TargetSyntaxError, TransformFailed, Unreadable, UserError)
from fixmono.model.fix import (BACKENDS, Case, Dep3, FileChange, Fix, Fixture, HotFix, ReproResult,
                               Rewrite, Transform, UpstreamCommit, Verdict, installed_file, lazy)
from fixmono.model.outcome import FileOutcome, FixOutcome, Status

__all__ = ["BACKENDS", "Case", "Dep3", "FileChange", "FileOutcome", "Fix", "FixDeclarationError", "FixOutcome", "Fixture",
           "FixtureUnavailable", "HotFix", "NotApplicable", "ReproResult", "Rewrite", "Status", "TargetSyntaxError",
           "Transform", "TransformFailed", "Unreadable", "UpstreamCommit", "UserError", "Verdict", "installed_file", "lazy"]
