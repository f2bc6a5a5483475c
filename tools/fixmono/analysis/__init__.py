"""Stage 7, analysis: what the catalogue means for versions and environments.
The drift matrix over published wheels (drift.py) and over git history
(history.py), whether the installed libraries still need a fix by running its
reproducer (still_needed.py), and the status of an environment (status.py).
May import every stage before it; never the command line."""
