"""Stage 2, sources: where upstream text comes from. A git checkout read at
HEAD (upstream.py), a published wheel materialised into a scratch repository
(wheel.py), a remote ref fetched shallow and treeless (remote.py), the files
installed in an environment (installed.py); `--upstream` picks one (open.py).
A wheel this package did not build is checked before use (verify.py).
Every git process starts in git.py, the one git layer; other child processes
(pip, reproducers, compilers) through processes.py, which can always stop
them. May import: model."""
