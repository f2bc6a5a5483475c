"""Stage 5, output: what is written from outcomes. Patch series (series.py)
into the user's --out (out_dir.py), a branch (branch.py), both put in place
together (publish.py), patched wheels (wheel.py), and patched environments
(env_patch.py, with the journal in the environment: journal.py). May import: model,
sources, engines, apply."""
