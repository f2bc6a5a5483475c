"""On this CPU machine (torch 2.13.0+cpu, which has the bug's code): the
reproducer says it needs a CUDA device, and the hot-fix swaps the ported
masked() into Inductor's Triton overrides and gives the installed one back."""
import json
import subprocess
import sys

from fixmono.runtime.child import child_env

REPRO = "fixmono.fixes.pytorch.inductor_masked_store_cache.repro"
FIX_ID = "pytorch-inductor-masked-store-cache"


def test_without_cuda_the_reproducer_says_what_it_needs():
    run = subprocess.run([sys.executable, "-m", REPRO, "--json"], capture_output=True, text=True, env=child_env(),
                         timeout=600)
    result = json.loads(run.stdout)
    assert run.returncode == 77 and result["verdict"] == "skipped" and result["needs"] == "cuda", run.stdout


def test_the_hot_fix_changes_masked_in_place_and_gives_it_back():
    code = ("import inspect\n"
            "from torch._inductor.codegen.triton import TritonKernelOverrides as T\n"
            "from fixmono.runtime.hotfixes import enable_hotfixes, disable_hotfixes\n"
            "held = T.masked\n"
            "print('store_cache' in inspect.getsource(held))\n"
            f"print(enable_hotfixes([{FIX_ID!r}]))\n"
            "print('cse.store_cache' in held.__code__.co_names or 'store_cache' in held.__code__.co_names)\n"
            f"print(disable_hotfixes([{FIX_ID!r}]))\n"
            "print('store_cache' in held.__code__.co_names)\n")
    run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=child_env(), timeout=300)
    lines = run.stdout.splitlines()
    assert run.returncode == 0 and len(lines) == 5, run.stdout + run.stderr[-2000:]
    assert lines[0] == "False" and lines[2] == "True" and lines[4] == "False", lines
    assert "enabled: torch._inductor.codegen.triton.TritonKernelOverrides.masked from the diff" in lines[1], lines[1]
