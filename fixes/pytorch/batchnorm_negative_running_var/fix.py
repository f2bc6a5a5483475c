"""BatchNorm with a negative running_var: eager and fused kernels disagree.

Declaration only; the transformation is in transform.py, the runtime check in
hotfix.py and the reproducer in repro.py.
"""
from fixmono.model.fix import Case, Dep3, FileChange, Fix, Fixture, HotFix, lazy

from . import hotfix
from .transform import TRANSFORM

TARGET = "test/test_jit_fuser_te.py"

# Inline transformation cases: our own snippets, shaped like the real test.
_LOOP = '''
class TestFuser(JitTestCase):
    def test_batch_norm(self):
        def check(fn, args):
            traced = torch.jit.trace(fn, args)
            torch.testing.assert_close(fn(*args), traced(*args), equal_nan=True)

        def norm(inp, t):
            return torch.batch_norm(inp, t, t, t, t, False, 0.1, 1e-4, False).relu()

        for device in self.devices:
            inp = torch.randn(2, 8, 5, 5, device=device)
            {assign}
            check(norm, (inp, t))
'''
_FIXED = ("# running_var must be >= 0: where var + eps < 0 eager gives NaN, fused kernels may not (#177665)"
          "\n            t = torch.randn(8, device=device).abs()")

CASES = (
    Case("shared tensor in the device loop",
         before=_LOOP.format(assign="t = torch.randn(8, device=device)"),
         after=_LOOP.format(assign=_FIXED)),
    Case("keyword running_var, module-level test function",
         before="def test_batch_norm():\n    v = torch.randn(3)\n"
                "    torch.batch_norm(x, None, None, m, running_var=v, training=False,\n"
                "                     momentum=0.1, eps=1e-5, cudnn_enabled=False)\n",
         after="def test_batch_norm():\n"
               "    # running_var must be >= 0: where var + eps < 0 eager gives NaN, fused kernels may not (#177665)\n"
               "    v = torch.randn(3).abs()\n"
               "    torch.batch_norm(x, None, None, m, running_var=v, training=False,\n"
               "                     momentum=0.1, eps=1e-5, cudnn_enabled=False)\n"),
    Case("already fixed with abs()", expect="already-applied",
         before=_LOOP.format(assign="t = torch.randn(8, device=device).abs()")),
    Case("already fixed with torch.rand", expect="already-applied",
         before=_LOOP.format(assign="t = torch.rand(8, device=device)")),
    *(Case(f"already non-negative: {form}", expect="already-applied", before=_LOOP.format(assign=form))
      for form in ("t = torch.randn(8, device=device) ** 2",
                   "t = torch.randn(8, device=device).clamp(min=0)",
                   "t = torch.randn(8, device=device).exp()",
                   "t = torch.rand(8, device=device) + 0.1",
                   "t = torch.randn(8, device=device)\n            t = t.abs()",
                   "t = torch.randn(8, device=device)\n            t.abs_()",
                   "t = torch.randn(8, device=device)\n            t.clamp_(min=1e-3)")),
    Case("made negative again after the fix: what was found is named", expect="failed",
         before=_LOOP.format(assign="t = torch.randn(8, device=device).abs()\n            t.sub_(1)")),
    Case("no test_batch_norm in the file", expect="not-applicable",
         before="def test_layer_norm(self):\n    x = torch.randn(4)\n"),
    Case("test_batch_norm without torch.batch_norm", expect="not-applicable",
         before="def test_batch_norm(self):\n    y = F.batch_norm(x, m, v)\n"),
    Case("two test_batch_norm functions break the one-site contract", expect="failed",
         before=_LOOP.format(assign="t = torch.randn(8, device=device)")
         + _LOOP.format(assign="t = torch.randn(8, device=device)").replace("TestFuser", "TestFuser2")),
    Case("running_var comes from somewhere we cannot judge", expect="failed",
         before=_LOOP.format(assign="t = make_stats(8)")),
)



FIX = Fix(
    id="pytorch-batchnorm-negative-running-var",
    title="[ROCm][CI] test_jit_fuser_te: use a non-negative running_var in test_batch_norm",
    upstream="pytorch",
    description="""\
TestTEFuser.test_batch_norm passed one torch.randn tensor as weight, bias,
running_mean and running_var. Where running_var + eps < 0, eager batch norm
computes 1/sqrt(negative) = NaN and relu keeps it; on ROCm 7.2 (MI300X) the
NNC/TE fused kernel returned numbers there instead, and
assert_close(equal_nan=True) failed with 25600 of 81920 elements (31.2%)
mismatched: exactly the channels with a negative variance.

A negative running variance is invalid input, so the test data is made
valid: the shared tensor is made non-negative. The traced graphs, and so
what the fuser is tested on, are unchanged.""",
    dep3=Dep3(
        origin="upstream, https://github.com/pytorch/pytorch/pull/177665",
        bug="https://github.com/pytorch/pytorch/issues/168755",
        forwarded="not-needed",
        applied_upstream="https://github.com/pytorch/pytorch/pull/177665",
        last_update="2026-11-22",
    ),
    backends=("rocm",),
    changes=(FileChange(TARGET, TRANSFORM, sites=1,
                        fixture=Fixture("fixtures/test_jit_fuser_te.py", mutate=("TestTEFuser.test_batch_norm",),
                                        edit="replace")),),
    references=("https://github.com/pytorch/pytorch/pull/177665",
                "https://github.com/pytorch/pytorch/issues/168755"),
    cases=CASES,
    hotfix=HotFix(apply=hotfix.enable, remove=hotfix.disable, trigger="torch"),
    reproduce=lazy(f"{__package__}.repro:reproduce"),
    repro_needs="rocm",
    validate=lazy(f"{__package__}.validate:check"),
)
