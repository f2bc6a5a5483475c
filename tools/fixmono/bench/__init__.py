"""Beside the stages: benchmark helpers (GPU timing) and checkpoint
comparison, used by the fixes' benchmarks and compare_weights. Not part of
the patching framework: no stage imports it."""
