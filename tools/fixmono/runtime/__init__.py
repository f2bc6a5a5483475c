"""Stage 6, runtime: what fixes use when they run in a user's process. The
hot-fixes (hotfixes.py), functions defined again from transformed source
(define.py), the reproducers' verdict printer and command line (repro.py),
and how a child Python finds this package (child.py). May import: model,
sources, engines, apply, output."""
