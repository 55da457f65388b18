"""Rewrites of the graphs Dynamo hands the backend, before AOTAutograd traces them.

Dynamo traces torch.addcdiv(a, b, c, value=v) as torch.add(a, torch.mul(torch.div(b, c), v))
(to keep a symbolic `value` from breaking the graph). Run op by op, that chain rounds twice more
than ATen's addcdiv kernel, which computes in the computation dtype and rounds once: for 16-bit
tensors near cancellation the chain is many units in the last place off what eager gives the
program as written. The chain, when it is exactly Dynamo's (torch.* functions, a number as
`value`, intermediates used once), is put back as the one op.
"""
import torch


def _call(node, target):
    return node.op == "call_function" and node.target is target and not node.kwargs


def recover_addcdiv(gm):
    """`gm` with Dynamo's addcdiv chains made addcdiv calls again (in place); returns `gm`."""
    changed = False
    for add in list(gm.graph.nodes):
        if not _call(add, torch.add) or len(add.args) != 2:
            continue
        mul = add.args[1]
        if not isinstance(mul, torch.fx.Node) or not _call(mul, torch.mul) or len(mul.args) != 2 or len(mul.users) != 1:
            continue
        div, value = mul.args
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            continue
        if not isinstance(div, torch.fx.Node) or not _call(div, torch.div) or len(div.args) != 2 or len(div.users) != 1:
            continue
        with gm.graph.inserting_before(add):
            fused = gm.graph.call_function(torch.addcdiv, (add.args[0], *div.args), {"value": value})
        fused.meta = dict(add.meta)
        add.replace_all_uses_with(fused)
        for node in (add, mul, div):
            gm.graph.erase_node(node)
        changed = True
    if changed:
        gm.recompile()
    return gm
