"""PyTorch Inductor: mix-order reduction never writes a gradient that is a view
into a cat buffer (pytorch/pytorch#193061, fixed by #193103 in 2.15.0).

Declaration only: transform.py, repro.py (CUDA), hotfix.py, validate.py.
"""
from fixmono.model.fix import Case, Dep3, FileChange, Fix, Fixture, HotFix, lazy

from . import hotfix
from .transform import BUFFER, REDUCE, TRANSFORM, WHY

TARGET = "torch/_inductor/codegen/simd.py"

_MODULE = '''from .. import ir
from ..virtualized import V


class SIMDScheduling:
    def _codegen_mix_order_reduction(self, node1, node2):
        for idx, partial_accum in enumerate(kernel.saved_partial_accumulate):
            buffer_name = partial_accum.buffer_name
{body}            V.graph.wrapper_code.allocated.add(buffer_name)
'''
_NAMED = ('            final_reduce = f"{buffer_name} = {ws_name}[{start} : {end}].sum(dim=0)"\n'
          '            V.graph.wrapper_code.writeline(final_reduce)\n')
_INLINE = ('            V.graph.wrapper_code.writeline(\n'
           '                f"{buffer_name} = {ws_name}[{start} : {end}].sum(dim=0)",\n'
           '            )\n')


def _fixed(body: str, line: str) -> str:
    kept = body[body.index("            V.graph.wrapper_code.writeline("):]
    head = body[:body.index("            V.graph.wrapper_code.writeline(")]
    return head + (
        f"            {BUFFER} = V.graph.get_buffer(buffer_name)\n"
        f"            if {BUFFER} is not None and isinstance(getattr({BUFFER}, 'layout', None), ir.NonOwningLayout):\n"
        f"                {WHY}\n"
        f"                V.graph.wrapper_code.codegen_allocation({BUFFER})\n"
        f"                {REDUCE} = ({line}).split(' = ', 1)[1]\n"
        f"                V.graph.wrapper_code.writeline(f'{{buffer_name}}.copy_({{{REDUCE}}})')\n"
        f"            else:\n"
        + "\n".join("    " + x if x else x for x in kept.rstrip("\n").split("\n")) + "\n")


CASES = (
    Case("final_reduce built, then written (2.11-2.14)", path=TARGET, before=_MODULE.format(body=_NAMED),
         after=_MODULE.format(body=_fixed(_NAMED, "final_reduce"))),
    Case("written inline (2.10)", path=TARGET, before=_MODULE.format(body=_INLINE),
         after=_MODULE.format(body=_fixed(_INLINE, 'f"{buffer_name} = {ws_name}[{start} : {end}].sum(dim=0)"'))),
    Case("written through views (2.15)", expect="already-applied", path=TARGET, before=_MODULE.format(
        body='            if isinstance(spec, ir.NonOwningLayout):\n'
             '                V.graph.wrapper_code.writeline(f"{buffer_name}.copy_({reduced})")\n')),
    Case("no mix-order reduction (2.9)", expect="not-applicable", path=TARGET,
         before="class SIMDScheduling:\n    def codegen_node(self, node):\n        pass\n"),
    Case("the reduce written twice", expect="failed", path=TARGET,
         before=_MODULE.format(body=_NAMED + "            V.graph.wrapper_code.writeline(final_reduce)\n")),
    Case("ir not imported", expect="failed", path=TARGET,
         before=_MODULE.format(body=_NAMED).replace("from .. import ir\n", "")),
)

FIX = Fix(
    id="pytorch-inductor-mix-order-cat-grad",
    title="Inductor mix-order reduction: write final reduces through views (cat-assembled gradients)",
    upstream="pytorch",
    description="""\
torch.compile on CUDA (Triton), 2.10.0-2.14.1: when mix-order reduction fuses
a large row reduction with its column reduction, each partial column result
is finished on the host side by a line that rebinds the output buffer's name.
If that buffer is a view into another buffer (the gradients of chunk()s of
one parameter, assembled by a cat: AdaLN scale/shift tables), the real
buffer's region is never written, and the gradient there is whatever the
memory held. Write through the view (copy_) for such buffers, as 2.15.0
does.""",
    dep3=Dep3(
        origin="upstream, https://github.com/pytorch/pytorch/pull/193103",
        bug="https://github.com/pytorch/pytorch/issues/193061",
        forwarded="not-needed",
        applied_upstream="https://github.com/pytorch/pytorch/pull/193103",
        last_update="2026-11-24",
    ),
    backends=("cuda", "rocm"),
    changes=(FileChange(TARGET, TRANSFORM, sites=1,
                        fixture=Fixture("fixtures/simd.py", mutate=("SIMDScheduling._codegen_mix_order_reduction",),
                                        edit="move")),),
    references=("https://github.com/pytorch/pytorch/issues/193061",
                "https://github.com/pytorch/pytorch/pull/193103"),
    cases=CASES,
    hotfix=HotFix(apply=hotfix.enable, remove=hotfix.disable, trigger="torch._inductor.codegen.simd"),
    reproduce=lazy(f"{__package__}.repro:reproduce"),
    repro_needs="cuda",
    validate=lazy(f"{__package__}.validate:check"),
)
