"""Transformation engines: python.py (libcst) and cpp.py (tree-sitter), each
offering the Transform protocol of tools/fixlib/model.py."""
