"""Reproducer: the MoE router aux loss multiplied by the data-parallel world size.

    python -m fixmono.fixes.transformers.moe_aux_loss_world_size.repro [--world N] [--json]

With the installed transformers' Trainer, one SGD step of a tiny MoE model
(ranks.py) in one process and in N processes (default 2; DDP on gloo over
127.0.0.1, CPU), every rank holding the single process's batch: the same data,
so the router weights' gradients must be equal. Compared: the cross-entropy
part (aux coefficient 0), the aux-loss part (coefficient 0.1 minus 0) and the
whole gradient. Then the same with the hot-fix in every process. Exit 1
reproduced, 0 not reproduced, 77 skipped.
"""
from __future__ import annotations

import json
import os
import re
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from fixmono.model.fix import ReproResult, Verdict
from fixmono.runtime.child import child_env, module_command
from fixmono.runtime.repro import cli

RANKS = f"{__package__}.ranks"
EQUAL = 1e-4  # relative gradient difference of two equal computations (float32, summed in another order)
TIMEOUT = 300.0  # one group of processes, start to finish
LAUNCH_VARS = ("WORLD_SIZE", "RANK", "LOCAL_RANK", "LOCAL_WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT")


def free_ports(count: int) -> list[int]:
    sockets = [socket.socket() for _ in range(count)]
    try:
        for s in sockets:
            s.bind(("127.0.0.1", 0))
        return [s.getsockname()[1] for s in sockets]
    finally:
        for s in sockets:
            s.close()


def rank_env(world: int, rank: int, port: int) -> dict[str, str]:
    env = {k: v for k, v in child_env().items() if k not in LAUNCH_VARS}  # ours, not a launcher's around us
    # PYTHONFAULTHANDLER: a rank killed by a signal (SIGABRT from C++) prints where it was
    env.update(CUDA_VISIBLE_DEVICES="", OMP_NUM_THREADS="1", HF_HUB_OFFLINE="1", GLOO_SOCKET_IFNAME="lo",
               PYTHONFAULTHANDLER="1")
    if world > 1:
        env.update(WORLD_SIZE=str(world), RANK=str(rank), LOCAL_RANK=str(rank), LOCAL_WORLD_SIZE=str(world),
                   MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    return env


def run_groups(groups: dict[str, tuple[int, bool]], folder: Path) -> dict[str, dict]:
    """Every group ({label: (world size, hot-fix)}) at once, each rank its own
    process group (session); all are killed on a failure or at TIMEOUT, and
    nothing outlives this call. Returns rank 0's record per group."""
    ports = free_ports(len(groups))
    procs: list[tuple[str, Path, subprocess.Popen]] = []  # (group, its log, the rank)
    try:
        for (label, (world, hotfix)), port in zip(groups.items(), ports):
            (folder / label).mkdir(parents=True)
            for rank in range(world):
                log = folder / label / f"rank{rank}.log"
                with open(log, "w") as out:
                    procs.append((label, log, subprocess.Popen(
                        module_command(RANKS, str(folder / label / "out.json"), *(["--hotfix"] * hotfix)),
                        env=rank_env(world, rank, port), stdin=subprocess.DEVNULL, stdout=out,
                        stderr=subprocess.STDOUT, start_new_session=True)))
        deadline = time.monotonic() + TIMEOUT
        while any(p.poll() is None for *_, p in procs):
            if failed := [(label, log, p) for label, log, p in procs if p.poll() not in (None, 0)]:
                raise RuntimeError(failure(*failed[0]))
            if time.monotonic() > deadline:
                label = next(label for label, _, p in procs if p.poll() is None)
                raise RuntimeError(f"{label}: no result in {TIMEOUT:.0f} s")
            time.sleep(0.2)
        if failed := [(label, log, p) for label, log, p in procs if p.returncode != 0]:
            raise RuntimeError(failure(*failed[0]))
        return {label: json.loads((folder / label / "out.json").read_text()) for label in groups}
    finally:
        for *_, p in procs:
            if p.poll() is None:
                os.killpg(p.pid, signal.SIGKILL)
            p.wait()


def failure(label: str, log: Path, proc: subprocess.Popen) -> str:
    """`group: rankN: what it printed last (exit status)`: the last exception
    line (torch may print warnings after the traceback); else, for a rank
    killed by a signal, the innermost Python frame faulthandler printed and
    the C++ message before it (`terminate called ...`, `what(): ...`); else
    its last line."""
    code = proc.returncode
    status = f"killed by {signal.Signals(-code).name}" if code < 0 else f"exit {code}"
    lines = [line.strip() for line in log.read_text(errors="replace").splitlines() if line.strip()]
    errors = [line for line in lines if re.search(r"(Error|Exception)\b", line) and not line.startswith("Fatal Python")]
    if errors:
        return f"{label}: {log.stem}: {errors[-1][:300]} ({status})"
    said = [line for line in lines if line.startswith(("terminate called", "what():", "Fatal Python error"))]
    frames = [line for line in lines if line.startswith("File ")]
    if said or frames:
        return f"{label}: {log.stem}: {' / '.join(said[-3:] + frames[:1])[:400]} ({status})"
    return f"{label}: {log.stem}: {lines[-1][:300] if lines else 'printed nothing'} ({status})"


def compare(single: dict, multi: dict) -> dict:
    """Router-gradient comparison of one process and N processes on the same data."""
    import torch

    def flat(record, coef):
        return torch.cat([torch.tensor(v).flatten() for _, v in sorted(record["deltas"][coef].items())])

    zero, coef = sorted(single["deltas"], key=float)
    rel = lambda a, b: float((a - b).norm() / b.norm())  # noqa: E731
    aux_single = flat(single, coef) - flat(single, zero)
    aux_multi = flat(multi, coef) - flat(multi, zero)
    return {"world": multi["world"], "ce_rel_diff": rel(flat(multi, zero), flat(single, zero)),
            "aux_ratio": float(aux_multi.norm() / aux_single.norm()), "aux_rel_diff": rel(aux_multi, aux_single),
            "grad_rel_diff": rel(flat(multi, coef), flat(single, coef))}


def reproduce(world: str | None = None) -> ReproResult:
    if not (world or "2").isdigit() or int(world or 2) < 2:
        return ReproResult(Verdict.SKIPPED, f"--world {world}: give a whole number of processes, 2 or more")
    size = int(world or 2)
    try:
        import torch  # noqa: F401
        import transformers
        from transformers import Trainer  # noqa: F401 - needs accelerate
    except ImportError as err:
        return ReproResult(Verdict.SKIPPED, f"needs torch, transformers and accelerate (the Trainer): {err}")
    import torch.distributed as dist

    label = f"transformers {transformers.__version__}"
    if not dist.is_available() or not dist.is_gloo_available():
        return ReproResult(Verdict.SKIPPED, f"{label}: this torch has no gloo backend")
    from .hotfix import disable, enable

    message = enable()  # what the hot-fix says about this release (each patched rank enables it again)
    disable()
    groups = {"single": (1, False), "multi": (size, False), "single-fixed": (1, True), "multi-fixed": (size, True)}
    with tempfile.TemporaryDirectory(prefix="fixmono-aux-world-") as folder:
        try:
            records = run_groups(groups, Path(folder, "try1"))
        except RuntimeError as first:
            try:  # once more on fresh ports: another program may take a free port before rank 0 binds it
                records = run_groups(groups, Path(folder, "try2"))
            except RuntimeError as err:
                return ReproResult(Verdict.SKIPPED, f"{label}: cannot run the Trainer here ({first}; again: {err})")
    before, after = compare(records["single"], records["multi"]), compare(records["single-fixed"], records["multi-fixed"])
    details = {"release": label, "model": records["single"]["family"], "hotfix": message, "unpatched": before,
               "patched": after}
    numbers = (f"aux-loss gradient on {size} processes {before['aux_ratio']:.3g}x the single process's, router "
               f"gradient {before['grad_rel_diff']:.1%} off (cross-entropy part {before['ce_rel_diff']:.0e})")
    if before["ce_rel_diff"] > EQUAL or after["ce_rel_diff"] > EQUAL:
        return ReproResult(Verdict.SKIPPED, f"{label}: the cross-entropy gradients differ between 1 and {size} "
                                            f"processes ({before['ce_rel_diff']:.1e}): the runs are not comparable "
                                            f"here", details)
    if after["grad_rel_diff"] > EQUAL:
        return ReproResult(Verdict.REPRODUCED, f"{label}: even with the fix the aux-loss gradient on {size} processes "
                                               f"is {after['aux_ratio']:.3g}x the single process's "
                                               f"({after['grad_rel_diff']:.1%} off)", details)
    if before["grad_rel_diff"] <= EQUAL:
        return ReproResult(Verdict.NOT_REPRODUCED, f"{label}: {records['single']['family']} router gradient equal "
                                                   f"on 1 and {size} processes ({before['grad_rel_diff']:.0e})",
                           details)
    return ReproResult(Verdict.REPRODUCED, f"{label}: {numbers}; with the fix {after['aux_ratio']:.3g}x, "
                                           f"{after['grad_rel_diff']:.0e}", details)


def main(argv: list[str] | None = None) -> int:
    return cli(reproduce, __doc__, argv, options=(("--world", "processes of the data-parallel run (default 2)"),))


if __name__ == "__main__":
    sys.exit(main())
