"""Stage 3, engines: the transformations, python.py (libcst) and cpp.py
(tree-sitter), each offering model.fix.Transform. May import: model."""
