"""User-side mitigation for jaxlib builds without the fix: warm devices up one at a time.

XLA creates convolution runners (MIOpen GetSolution + CompileSolution) lazily,
on each device's first execution, on that device's thread. No XLA flag
serialises that (--xla_gpu_force_compilation_parallelism sizes compile thread
pools; --xla_gpu_autotune_level=0 skips autotuning, yet runners are still
compiled at first execution). Running the step once per device, sequentially,
before the parallel step makes each device create its runners while no other
device is inside MIOpen.

What it guarantees: the runners of the convolutions the warm-up executes are
created one device at a time. What it does not: convolutions first reached
later (another shape, another jitted function, a recompilation) are created
lazily again, concurrently; and it costs one extra step per device.
"""
from __future__ import annotations

import time
from typing import Callable, Sequence


def warm_up_one_device_at_a_time(step: Callable, args_per_device: Sequence[tuple]) -> list[float]:
    """Run `step(*args)` for each device's arguments in turn, waiting for each
    to finish before starting the next. Returns the seconds each took."""
    import jax

    seconds = []
    for args in args_per_device:
        start = time.perf_counter()
        jax.block_until_ready(step(*args))
        seconds.append(time.perf_counter() - start)
    return seconds
