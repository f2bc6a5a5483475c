"""What a long run (status --run, drift --run, make-patch --all) says while it
runs, on stderr: on a terminal one line redrawn with a bar and what is being
done; otherwise (a CI log, a pipe) one line per finished step, as pytest -v
prints. It keeps the steps that finished, so that a run stopped by Ctrl-C or a
timeout can print what it had before its last line.

The runners take `progress` as a plain callable (a note: what starts now) and
report a finished step with step_done(), so a lambda still serves them."""
from __future__ import annotations

import os
import re
import sys
import threading
import time


STEP_LINE = re.compile(r"^\[ *\d+/\d+\] \S.*: .+ \(\d+\.\d s\)$")  # a finished step, as a log shows it


class Progress:
    def __init__(self, total: int = 0, stream=None, quiet: bool = False):
        self.stream = stream or sys.stderr  # None where stderr is closed (2>&-): nothing is written
        self.quiet = quiet or self.stream is None
        self.tty = not self.quiet and is_terminal(self.stream)
        self.total, self.finished_steps, self.now = total, [], ""
        self.started = time.monotonic()
        self.lock = threading.Lock()  # drift --run --jobs N reports from N threads

    def silence(self) -> None:
        """--quiet: nothing on stderr but the run's last line."""
        self.quiet, self.tty = True, False

    def __call__(self, message: str) -> None:
        """A note: what the run is doing now (drawn on a terminal only)."""
        with self.lock:
            self.now = message
            self._draw()

    def finished(self, label: str, verdict: str, seconds: float | None = None) -> None:
        with self.lock:
            self.finished_steps.append((label, verdict, seconds))
            if self.tty:
                self.now = f"{label}: {verdict}"
                self._draw()
            elif not self.quiet:
                self._write(f"{self._count()} {label}: {verdict}{took(seconds)}\n")

    def _count(self) -> str:
        n = len(self.finished_steps)
        total = max(self.total, n)
        return f"[{n:>{len(str(total))}}/{total}]" if total else f"[{n}]"

    def _draw(self) -> None:
        if not self.tty:
            return
        try:  # the terminal stderr is on (stdout may be a file)
            width = os.get_terminal_size(self.stream.fileno()).columns - 1
        except (OSError, ValueError, AttributeError):
            width = 79
        n, total = len(self.finished_steps), max(self.total, len(self.finished_steps))
        bar = f"[{'#' * (20 * n // total):-<20}] " if total else ""
        self._write(f"\r\033[K{(bar + self._count() + ' ' + self.now)[:width]}")

    def _write(self, text: str) -> None:
        if self.stream is None:
            return
        try:
            self.stream.write(text)
            self.stream.flush()
        except (OSError, ValueError):  # stderr closed or gone: progress is never worth failing the run
            pass

    def clear(self) -> None:
        """Erase the terminal line (before the report is printed)."""
        with self.lock:
            if self.tty:
                self._write("\r\033[K")

    def table(self) -> str:
        """The steps that finished, one row each ('' when none did)."""
        if not self.finished_steps:
            return ""
        wide = max(len(label) for label, _, _ in self.finished_steps)
        rows = [f"  {label:<{wide}}  {verdict}{took(seconds)}" for label, verdict, seconds in self.finished_steps]
        total = f" of {self.total}" if self.total else ""
        return f"finished before it stopped ({len(rows)}{total}):\n" + "\n".join(rows) + "\n"

    def stopped(self, message: str = "interrupted") -> str:
        """For guard.run_command's `interrupted`: the table of what finished
        goes to stderr first; the one line that ends the run is returned."""
        self.clear()
        if not self.quiet:
            self._write(self.table())
        return message


def is_terminal(stream) -> bool:
    try:
        return stream.isatty()
    except (OSError, ValueError, AttributeError):  # closed, or not a file
        return False


def took(seconds: float | None) -> str:
    return "" if seconds is None else f" ({seconds:.1f} s)"


def step_done(progress, label: str, verdict: str, seconds: float | None = None) -> None:
    """Report a finished step to `progress` if it keeps them (a Progress), else as a note."""
    if isinstance(progress, Progress):
        progress.finished(label, verdict, seconds)
    else:
        progress(f"{label}: {verdict}")
