"""Stage 8, cli: the command lines. Argument parsing, the one table renderer
and the one JSON shape (render.py), exit codes and one-line errors (guard.py,
early.py), and one module per command. On top: nothing imports it."""
