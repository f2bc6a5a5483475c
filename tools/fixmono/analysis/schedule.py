"""Reproducers N at a time, on one machine: the scheduler of `status --run` and
`drift --run` (behaviour.py).

- At most `jobs` run at once, each with cores/jobs threads (OMP_NUM_THREADS,
  which torch reads, unless the caller set it): N torch processes each using
  every core slowed the transformers reproducers 3-10x on 2 cores.
- A reproducer that needs a GPU (Fix.repro_needs "cuda" or "rocm") holds a
  place on one of the GPUs while it runs: `per_gpu` of them at a time per GPU
  (shared(); their results, not their timings, are what they show: the ones
  that time things run alone). With several GPUs each sees only its own
  (CUDA_VISIBLE_DEVICES / HIP_VISIBLE_DEVICES). One that needs only a CPU sees
  no GPU: a "pure jnp" reproducer would otherwise run on the GPU that JAX
  finds, taking 75% of its memory, beside the GPU ones.
- A reproducer that needs the machine to itself (Fix.repro_alone: it times
  kernels, or uses every GPU at once) runs with nothing else
  running, every core and every GPU its own: these run first, one by one,
  before the others start. Where the GPUs here are of the other kind (a ROCm
  bug's reproducer on an NVIDIA machine) it cannot show what it times: it
  runs beside the others (on an H200 the MIOpen one took 10 s of the machine
  alone). It still runs on the GPU: as a CPU one, with its share of the cores,
  the batchnorm reproducer took 89 s instead of 20 s.
- The others start in the order given, GPU ones first, a CPU one passing a GPU
  one that waits for a GPU; the results come back in the order given,
  whatever order they finished in.
- Ctrl-C (or any error) stops every reproducer started (processes.stop_all),
  and waits for the workers to end before it propagates: no child outlives
  the run, and nothing is reported for a reproducer that was stopped.
"""
from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Callable, Hashable, Sequence, TypeVar

from fixmono.sources import processes

T = TypeVar("T")
GPU_BACKENDS = ("cuda", "rocm")
VISIBLE = {"cuda": "CUDA_VISIBLE_DEVICES", "rocm": "HIP_VISIBLE_DEVICES"}  # HIP's: among ROCR's, as the runtime reads
NO_GPU = {"CUDA_VISIBLE_DEVICES": "", "HIP_VISIBLE_DEVICES": "", "ROCR_VISIBLE_DEVICES": ""}


@dataclass(frozen=True)
class Task:
    key: Hashable
    gpu: bool = False  # holds a GPU while it runs
    alone: bool = False  # runs with nothing else running


def task(key: Hashable, fix, here: str | None = None) -> Task:
    """The task of `fix`'s reproducer: what its repro_needs and repro_alone declare;
    `here`: the kind of the GPUs this machine has ("cuda", "rocm"; None: none or unknown):
    of the other kind, not alone."""
    needs = getattr(fix, "repro_needs", "")
    other_kind = needs in GPU_BACKENDS and here in GPU_BACKENDS and needs != here
    return Task(key, gpu=needs in GPU_BACKENDS, alone=getattr(fix, "repro_alone", False) and not other_kind)


def cores() -> int:
    return os.cpu_count() or 1


def gpu_slots(kind: str | None, count: int) -> list[dict[str, str]]:
    """One environment per GPU of `kind` here ({} each where there is one or none:
    nothing to choose; a GPU reproducer on a machine without one says it cannot run)."""
    if kind not in VISIBLE or count <= 1:
        return [{}]
    name = VISIBLE[kind]
    given = os.environ.get(name)
    entries = [e.strip() for e in given.split(",")][:count] if given else [str(i) for i in range(count)]
    return [{name: entry} for entry in entries]


def shared(slots: Sequence[dict[str, str]], per_gpu: int) -> list[dict[str, str]]:
    """`per_gpu` places on each GPU of `slots` (gpu_slots), the GPUs taken in turn; where two share one,
    JAX does not take 75% of its memory at start (XLA_PYTHON_CLIENT_PREALLOCATE, unless set here)."""
    if per_gpu < 1:
        raise ValueError(f"per_gpu={per_gpu}: must be 1 or more")
    share = {} if per_gpu == 1 or "XLA_PYTHON_CLIENT_PREALLOCATE" in os.environ else \
        {"XLA_PYTHON_CLIENT_PREALLOCATE": "false"}
    return [{**slot, **share} for _ in range(per_gpu) for slot in (list(slots) or [{}])]


def threads(jobs: int) -> dict[str, str]:
    """The environment that gives each of `jobs` reproducers its share of the cores."""
    if jobs <= 1 or "OMP_NUM_THREADS" in os.environ:
        return {}
    return {"OMP_NUM_THREADS": str(max(1, cores() // jobs))}


def run(tasks: Sequence[Task], work: Callable[[Task, dict[str, str]], T], jobs: int,
        gpus: Sequence[dict[str, str]] = ({},)) -> dict[Hashable, T]:
    """{task.key: work(task, env)} for every task, at most `jobs` at a time;
    `env`: the variables its reproducer runs with (its threads, its GPU); `gpus`:
    one environment per GPU (gpu_slots)."""
    if jobs < 1:
        raise ValueError(f"jobs={jobs}: must be 1 or more")
    import concurrent.futures  # here: `fixmono status` without --run imports this module for --jobs's help
    pending = sorted(tasks, key=lambda t: (not t.alone, not t.gpu))  # stable: the given order within each kind
    shared, gpus = threads(jobs), list(gpus) or [{}]
    free = list(range(len(gpus)))
    running: dict = {}  # future: (task, its GPU slot or None)
    results: dict[Hashable, T] = {}
    pool = concurrent.futures.ThreadPoolExecutor(max_workers=max(1, jobs))

    def start(t: Task, slot: int | None, env: dict[str, str]) -> None:
        running[pool.submit(work, t, env)] = (t, slot)

    try:
        while pending or running:
            for t in list(pending):
                if len(running) >= jobs or any(r.alone for r, _ in running.values()):
                    break
                if t.alone:
                    if not running:
                        pending.remove(t)
                        start(t, None, {})
                    break  # nothing passes a reproducer that waits to run alone
                if t.gpu and not free:
                    continue  # a CPU one behind it may start
                slot = free.pop(0) if t.gpu else None
                pending.remove(t)
                start(t, slot, {**shared, **(gpus[slot] if t.gpu else NO_GPU)})
            done, _ = concurrent.futures.wait(running, return_when=concurrent.futures.FIRST_COMPLETED)
            for future in done:
                t, slot = running.pop(future)
                if slot is not None:
                    free = sorted(free + [slot])
                results[t.key] = future.result()  # a worker's error (or Ctrl-C in a double) ends the run
    except BaseException:
        for future in running:
            future.cancel()
        processes.stop_all()
        pool.shutdown(wait=True)  # the workers end (and remove what they were building) before it propagates
        processes.resume()  # nothing of this run is left to stop: a caller that goes on may start commands again
        raise
    pool.shutdown(wait=True)
    return {t.key: results[t.key] for t in tasks}
