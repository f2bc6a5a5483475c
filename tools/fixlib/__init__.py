"""The fix framework: the Fix model, discovery, engines, upstream sources and
the patch writer behind tools/make_patch."""
