"""Stage 4, apply: a fix on a source. The match contract and presence check
(contract.py), reverts through git history (revert.py), and `run` (run.py),
the one function that gives outcomes for (source, fixes). Pure: nothing here
writes. May import: model, sources, engines."""
