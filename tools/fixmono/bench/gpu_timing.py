"""GPU time per call, from many calls captured in one CUDA graph and replayed:
launch latency and Python are not in the figure. Used by the benchmarks."""
from __future__ import annotations

import statistics


def graph_ms(fn, budget_ms: float = 20.0, max_reps: int = 200) -> float:
    """Median milliseconds per fn() over 5 replays of a graph of fn() calls
    sized to about `budget_ms` (at least 3 calls)."""
    import torch

    main = torch.cuda.current_stream()
    warm = torch.cuda.Stream()
    warm.wait_stream(main)
    with torch.cuda.stream(warm):  # compile, autotune and allocate outside the capture
        fn()
        fn()
    main.wait_stream(warm)
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    fn()
    end.record()
    end.synchronize()
    reps = max(3, min(max_reps, int(budget_ms / max(start.elapsed_time(end), 1e-3))))
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        for _ in range(reps):
            fn()
    graph.replay()
    times = []
    for _ in range(5):
        start.record()
        graph.replay()
        end.record()
        end.synchronize()
        times.append(start.elapsed_time(end) / reps)
    del graph
    return statistics.median(times)
