"""huggingface/transformers#48690 as a libcst transformation of
`Trainer.compute_loss` (src/transformers/trainer.py).

With `average_tokens_across_devices` (opt-in from 4.46.2, the default from
4.54.0) the model's cross-entropy is a sum over this rank's tokens divided by
the tokens of all ranks, and the Trainer multiplies the loss by the number of data-parallel
processes so that DDP's gradient averaging gives the global mean. A MoE model
(mixtral, qwen*_moe, olmoe ...) has already added `coef * aux_loss` to that
loss, and its aux_loss is a per-rank mean that DDP's averaging already makes
right: the multiplication scales it by the world size too.

The rewrite keeps the original `loss *= <scale>` for every other loss and,
when the loss is the model's own (no label smoother, no compute_loss_func) and
the output carries an `aux_loss`, scales only the rest:
`(loss - aux) * (<scale>) + aux`, with aux = the model's router_aux_loss_coef
(or its config's, or its text_config's for the VL models) times aux_loss.

Presence check: an `aux_loss` already named in the scaling block. No block
(4.46.1 and older): no anchor.
"""
from __future__ import annotations

import libcst as cst

from fixmono.engines.python import LinePlanTransformer, PythonTransform, code, find_all

FUNCTION = "Trainer.compute_loss"
FLAG = "average_tokens_across_devices"
NEW_NAMES = ("router_aux", "router_model", "router_config", "router_coef")
WHY = ("# A MoE model's loss holds coef * aux_loss, a per-rank mean that DDP's averaging already makes right:",
       "# scale only the token-normalized rest (huggingface/transformers#48690).")


def scaling_block(function: cst.FunctionDef) -> list[cst.If]:
    """The `if self.args.average_tokens_across_devices and ...:` blocks."""
    return [node for node in find_all(function, cst.If)
            if any(isinstance(n, cst.Attribute) and n.attr.value == FLAG for n in find_all(node.test, cst.Attribute))]


def scales_loss(line: cst.SimpleStatementLine) -> cst.BaseExpression | None:
    """`loss *= <scale>` -> scale."""
    stmt = line.body[0] if len(line.body) == 1 else None
    if (isinstance(stmt, cst.AugAssign) and isinstance(stmt.operator, cst.MultiplyAssign)
            and isinstance(stmt.target, cst.Name) and stmt.target.value == "loss"):
        return stmt.value
    return None


def mentions_aux_loss(node: cst.CSTNode) -> bool:
    return any("aux_loss" in n.value for n in find_all(node, cst.Name)) or any(
        "aux_loss" in n.value for n in find_all(node, cst.SimpleString))


def assigned(function: cst.FunctionDef) -> set[str]:
    return {t.target.value for a in find_all(function, cst.Assign) for t in a.targets if isinstance(t.target, cst.Name)}


class ScaleOnlyTheTokenLoss(LinePlanTransformer):
    mentioning = r"\bcompute_loss\b"

    def targets(self, qualname: str) -> bool:
        return qualname == FUNCTION

    def plan(self, function: cst.FunctionDef) -> dict:
        blocks = scaling_block(function)
        if not blocks:
            return {}  # no token averaging across devices (4.46.1 and older): not this code
        self.anchors += 1
        if len(blocks) != 1:
            self.problems.append(f"{FUNCTION}: {len(blocks)} blocks test {FLAG}, expected one")
            return {}
        block = blocks[0]
        if mentions_aux_loss(block):
            self.found("router aux loss kept out of the world-size scaling")
            return {}
        lines = [(line, scale) for line in find_all(block.body, cst.SimpleStatementLine)
                 if (scale := scales_loss(line)) is not None]
        if len(lines) != 1:
            self.problems.append(f"{FUNCTION}: expected one `loss *= <scale>` under {FLAG}, found {len(lines)}")
            return {}
        if not {"labels", "outputs"} <= assigned(function):
            self.problems.append(f"{FUNCTION}: `labels` and `outputs` are not both assigned here; cannot tell the "
                                 "model's own loss from a custom one")
            return {}
        if taken := {n.value for n in find_all(function, cst.Name)} & set(NEW_NAMES):
            self.problems.append(f"{FUNCTION}: the name(s) {', '.join(sorted(taken))} are taken")
            return {}
        line, scale = lines[0]
        self.change("router aux loss kept out of the world-size scaling")
        head = cst.parse_statement('router_aux = outputs.get("aux_loss") if isinstance(outputs, dict) else None\n')
        branch = cst.parse_statement(
            "if router_aux is not None and labels is None and self.compute_loss_func is None:\n"
            "    router_model = self.accelerator.unwrap_model(model)\n"
            '    router_coef = getattr(router_model, "router_aux_loss_coef", None)\n'
            "    if router_coef is None:  # the VL models read it from their text_config\n"
            '        router_config = getattr(router_model, "config", None)\n'
            '        router_config = getattr(router_config, "text_config", None) or router_config\n'
            '        router_coef = getattr(router_config, "router_aux_loss_coef", 0.0)\n'
            "    router_aux = router_coef * router_aux.to(loss.device)\n"
            f"    loss = (loss - router_aux) * ({code(scale)}) + router_aux\n"
            "else:\n"
            "    pass\n")
        # the original line itself as the else branch
        branch = branch.with_changes(orelse=cst.Else(body=cst.IndentedBlock(body=[line.with_changes(leading_lines=[])])))
        return {line: [head.with_changes(leading_lines=[*line.leading_lines, *(cst.EmptyLine(comment=cst.Comment(c)) for c in WHY)]),
                       branch]}


TRANSFORM = PythonTransform(ScaleOnlyTheTokenLoss, description="keep the router aux loss out of the world-size scaling",
                            anchor=f"the {FLAG} scaling in {FUNCTION}")
