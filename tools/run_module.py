"""Entry point of every fix's :repro target: runs the module named by the
first argument as __main__ (a fix module imports its siblings relatively, so
it runs as part of its package, never as a loose script)."""
import runpy
import sys

if __name__ == "__main__":
    module = sys.argv.pop(1)
    runpy.run_module(module, run_name="__main__", alter_sys=True)
