"""Random numbers in compiled graphs (dropout, rand, randn): each random node of a graph becomes
coil's philox_random, whose values are a function of a seed, the element's index and the node's
stream (its number in the graph), computed inside coil's kernels (codegen/philox.h). The graph
gets one more input, the seed, drawn from PyTorch's generator of the graph's device at every
call: torch.manual_seed makes runs repeatable, and each call draws new values, as eager does.
The values follow PyTorch's distributions; they are not eager's bits (nor are Inductor's).

torch.ops.coil.philox_random is also a PyTorch op, computing the same bits with tensor ops:
the graph's eager fallback runs it, and tests check coil's kernels against it.
"""
import contextlib

import torch

aten = torch.ops.aten

_LIBRARY = torch.library.Library("coil", "DEF")  # noqa: TOR901 - coil's own namespace
_LIBRARY.define("philox_random(Tensor seed, SymInt[] size, int stream, str distribution, ScalarType dtype) -> Tensor")

_MASK = 0xFFFFFFFF
_BITS = {torch.float64: 53, torch.float32: 24, torch.float16: 11, torch.bfloat16: 8}


def _philox_uniform(seed, index, stream):
    """Philox4x32-10 (codegen/philox.h) on int64 tensors holding 32-bit words: uniform f64 in
    [0, 1) on the 2^-53 grid. Products of two words wrap modulo 2^64 as in C."""
    c0, c1 = index & _MASK, (index >> 32) & _MASK
    c2, c3 = torch.full_like(index, stream & _MASK), torch.full_like(index, (stream >> 32) & _MASK)
    k0, k1 = seed & _MASK, (seed >> 32) & _MASK
    for _ in range(10):
        p0, p1 = c0 * 0xD2511F53, c2 * 0xCD9E8D57
        hi0, lo0, hi1, lo1 = (p0 >> 32) & _MASK, p0 & _MASK, (p1 >> 32) & _MASK, p1 & _MASK
        c0, c1, c2, c3 = hi1 ^ c1 ^ k0, lo1, hi0 ^ c3 ^ k1, lo0
        k0, k1 = (k0 + 0x9E3779B9) & _MASK, (k1 + 0xBB67AE85) & _MASK
    bits = (c0 << 21) | (c1 >> 11)  # the top 53 bits of the 64-bit word c0:c1
    return bits.to(torch.float64) * 2.0 ** -53


def _philox_random(seed, size, stream, distribution, dtype):
    index = torch.arange(_count(size), device=seed.device, dtype=torch.int64)
    u = _philox_uniform(seed, index, 2 * stream)
    if distribution == "normal":
        v = torch.sqrt(-2.0 * torch.log(1.0 - u)) * torch.cos(2.0 * torch.pi * _philox_uniform(seed, index, 2 * stream + 1))
    else:
        scale = 2.0 ** _BITS[dtype]
        v = torch.floor(u * scale) / scale
    return v.to(dtype).view(list(size))


def _count(size):
    n = 1
    for s in size:
        n *= s
    return n


def _philox_random_fake(seed, size, stream, distribution, dtype):
    return torch.empty(list(size), dtype=dtype, device=seed.device)


_LIBRARY.impl("philox_random", _philox_random, "CompositeExplicitAutograd")
_LIBRARY.impl("philox_random", _philox_random_fake, "Meta")
PHILOX = torch.ops.coil.philox_random.default


def _distribution(node):
    """(sizes, dtype, "uniform" / "normal", how the draw becomes the node's value) of a random
    node coil draws itself, or None (another generator, a layout philox_random does not make)."""
    if node.op != "call_function" or node.kwargs.get("generator") is not None:
        return None
    val = node.meta.get("val")
    if not isinstance(val, torch.Tensor) or val.dtype not in _BITS or not val.is_contiguous():
        return None
    sizes = list(val.shape)
    if not all(type(s) is int for s in sizes):
        return None
    target = node.target
    if target in (aten.rand.default, aten.rand_like.default):
        return sizes, val.dtype, "uniform", None
    if target in (aten.randn.default, aten.randn_like.default):
        return sizes, val.dtype, "normal", None
    if target == aten.bernoulli.p:
        p = node.args[1] if len(node.args) > 1 else node.kwargs.get("p", 0.5)
        if not isinstance(p, (int, float)):
            return None
        return sizes, val.dtype, "uniform", lambda g, u: g.call_function(aten._to_copy.default, (g.call_function(
            aten.lt.Scalar, (u, p)),), {"dtype": val.dtype})
    if target == aten.uniform.default:
        low = node.args[1] if len(node.args) > 1 else node.kwargs.get("from", 0.0)
        high = node.args[2] if len(node.args) > 2 else node.kwargs.get("to", 1.0)
        if not all(isinstance(v, (int, float)) for v in (low, high)):
            return None
        return sizes, val.dtype, "uniform", lambda g, u: g.call_function(aten.add.Tensor, (g.call_function(
            aten.mul.Tensor, (u, high - low)), low))
    return None


def with_seed(gm, device):
    """`gm` with its random nodes drawn by philox_random from a new last input, the seed (a 0-d
    int64 on `device`), or None when it has none."""
    found = [(n, d) for n in gm.graph.nodes if (d := _distribution(n)) is not None]
    if not found:
        return None
    from torch._guards import detect_fake_mode

    placeholders = [n for n in gm.graph.nodes if n.op == "placeholder"]
    fake_mode = detect_fake_mode([n.meta.get("val") for n in placeholders])
    graph = gm.graph
    with graph.inserting_after(placeholders[-1]) if placeholders else graph.inserting_before(next(iter(graph.nodes))):
        seed = graph.placeholder("coil_seed")
    with fake_mode or contextlib.nullcontext():
        seed.meta["val"] = torch.empty((), dtype=torch.int64, device=device)
        for stream, (node, (sizes, dtype, distribution, finish)) in enumerate(found):
            with graph.inserting_before(node):
                value = graph.call_function(PHILOX, (seed, sizes, stream, distribution, dtype))
                value.meta["val"] = torch.empty(sizes, dtype=dtype, device=device)
                if finish is not None:
                    value = _traced(graph, finish, value)
            node.replace_all_uses_with(value)
            graph.erase_node(node)
    graph.lint()
    gm.recompile()
    return gm


def _traced(graph, finish, value):
    """`finish` applied to `value` as graph nodes, each given its fake value."""
    class Recorder:
        def call_function(self, target, args, kwargs=None):
            node = graph.call_function(target, args, kwargs or {})
            vals = torch.fx.node.map_arg((args, kwargs or {}), lambda n: n.meta["val"])
            node.meta["val"] = target(*vals[0], **vals[1])
            return node

    return finish(Recorder(), value)


def seeded(compiled, device):
    """`compiled` (a graph given its seed last) called with a fresh seed from PyTorch's
    generator of `device` at every call."""
    def call(*args):
        seed = torch.randint(-2 ** 63, 2 ** 63 - 1, (), dtype=torch.int64, device=device)
        return compiled(*args, seed)

    return call
