"""Input mutations AOTAutograd keeps in the graph (keep_inference_input_mutations): an optimizer
step's new parameters and moments, BatchNorm's running statistics, written into the graph's
inputs by aten.copy_ nodes at its end.

coil takes each such value as an extra result of the graph (`split`). A compiled graph computes
it over the input's own memory where its step order allows (runtime/memory_plan.h,
outputs_over_inputs), so nothing is copied; anything else (a graph coil splits, or runs in
eager, or an input that was not used in place) gets `copy_` after the call, which is what
AOTAutograd's wrapper did for every mutated input before.
"""
import torch

_COPY = torch.ops.aten.copy_.default


def split(gm):
    """`gm`'s trailing copy_ nodes into its inputs taken out, each copied value appended to the
    graph's results. Returns the graph and [(result index, placeholder position)], or `gm` and []
    when it has none. A copy_ whose input a later node reads stays a node of the graph (a
    result that is the input itself is the input after the copy, as in eager)."""
    output = next(n for n in reversed(gm.graph.nodes) if n.op == "output")
    results = output.args[0]
    if not isinstance(results, (list, tuple)):
        return gm, []
    placeholders = {n: i for i, n in enumerate(n for n in gm.graph.nodes if n.op == "placeholder")}
    order = {n: i for i, n in enumerate(gm.graph.nodes)}
    copies = []
    for node in gm.graph.nodes:
        if node.op != "call_function" or node.target is not _COPY or node.users or len(node.args) != 2 or node.kwargs:
            continue
        target, value = node.args
        if target not in placeholders or not isinstance(value, torch.fx.Node) or value.target is _COPY:
            continue
        if any(order[u] > order[node] for u in target.users if u is not node and u is not output):
            continue
        if not all(isinstance(v.meta.get("val"), torch.Tensor) and not v.meta["val"].is_complex() for v in (target, value)):
            continue
        copies.append(node)
    if not copies or len({c.args[0] for c in copies}) != len(copies):
        return gm, []
    updates = []
    appended = list(results)
    for node in copies:
        updates.append((len(appended), placeholders[node.args[0]]))
        appended.append(node.args[1])
        gm.graph.erase_node(node)
    output.args = (type(results)(appended),)
    gm.recompile()
    gm.meta["coil_updates"] = updates
    return gm, updates


def finish(results, args, updates):
    """The graph's own results, after copying each update's value (None: already in its input)
    into its input."""
    for index, position in updates:
        value = results[index]
        if value is not None and value is not args[position]:
            args[position].copy_(value)
    count = len(results) - len(updates)
    return type(results)(results[:count]) if isinstance(results, (list, tuple)) else results


def applied(compiled, updates):
    """`compiled` (a callable of the split graph) returning the original graph's results, its
    updates copied into their inputs."""
    if not updates:
        return compiled

    def call(*args):
        return finish(compiled(*args), args, updates)

    return call
