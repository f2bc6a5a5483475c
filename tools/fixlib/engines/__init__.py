"""Transformation engines: python (libcst). A C++ engine (tree-sitter) plugs in
beside it by offering the same Transform protocol (tools/fixlib/model.py)."""
