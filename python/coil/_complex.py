"""Complex tensors as pairs of reals: the graph rewrite that lets coil compile the complex
arithmetic and data movement around FFTs and complex casts.

coil's compiler knows real dtypes only. A complex tensor of shape S is, in memory, a real tensor
of shape S + [2] (torch.view_as_real: real and imaginary parts interleaved), so ops on complex
values that have a rule below are traced again as real ops on those pairs: casts from and to
complex, complex(), polar(), conjugation, clones, slices, padding, permutes, views, repeat,
cat, where and the arithmetic of add, sub, mul, neg and abs. Where a complex value meets a node with no rule (an FFT,
a library call; an op coil leaves to eager), view_as_complex / view_as_real turn the pair back
into PyTorch's complex tensor and again into a pair: views, free, which run in PyTorch without a
warning (they compute nothing). The graph's complex inputs and outputs are PyTorch's.
"""
import operator

import torch

aten = torch.ops.aten

_REAL = {torch.complex64: torch.float32, torch.complex128: torch.float64, torch.complex32: torch.float16}
_COMPLEX = {v: k for k, v in _REAL.items()}
BOUNDARY = frozenset({"aten.view_as_real.default", "aten.view_as_complex.default"})


class _Pair:
    """A complex value held as its real view (shape S + [2])."""

    def __init__(self, real):
        self.real = real

    @property
    def dim(self):
        return self.real.dim() - 1

    @property
    def shape(self):
        return list(self.real.shape[:-1])


def has_complex(gm):
    def complex_val(v):
        return isinstance(v, torch.Tensor) and v.dtype.is_complex

    for n in gm.graph.nodes:
        val = n.meta.get("val")
        if any(complex_val(v) for v in (val if isinstance(val, (list, tuple)) else [val])):
            return True
    return False


def as_real_pairs(gm, values):
    """`gm` traced again with its complex values as real pairs where rules apply, or None (no
    complex value, or the trace failed: the graph then stays as it was)."""
    if not has_complex(gm):
        return None
    from torch._guards import detect_fake_mode
    from torch.fx.experimental.proxy_tensor import make_fx

    fake_mode = detect_fake_mode(values)
    if fake_mode is None:
        return None
    allowed = fake_mode.allow_non_fake_inputs
    fake_mode.allow_non_fake_inputs = True
    try:
        with fake_mode:
            return make_fx(_Interpreter(gm).run_outputs)(*values)
    except Exception:  # noqa: BLE001 - a rule that does not apply here: keep the graph
        return None
    finally:
        fake_mode.allow_non_fake_inputs = allowed


def _as_complex(v):
    return aten.view_as_complex.default(v.real) if isinstance(v, _Pair) else v


def _as_pair(v):
    if isinstance(v, _Pair):
        return v
    if isinstance(v, torch.Tensor) and v.dtype in _REAL:
        return _Pair(aten.view_as_real.default(v))
    return None


class _Interpreter(torch.fx.Interpreter):
    """Runs the graph (under make_fx) with complex values as _Pair where a rule takes them."""

    def run_outputs(self, *args):
        out = self.run(*args)
        return torch.utils._pytree.tree_map(_as_complex, out, is_leaf=lambda v: isinstance(v, _Pair))

    def call_function(self, target, args, kwargs):
        if target is operator.getitem:
            return args[0][args[1]]
        rule = _RULES.get(str(target))
        if rule is not None:
            try:
                result = rule(*args, **kwargs)
            except _NoRule:
                result = None
            if result is not None:
                return result
        unwrap = lambda v: _as_complex(v) if isinstance(v, _Pair) else v  # noqa: E731
        args, kwargs = torch.utils._pytree.tree_map(unwrap, (args, kwargs), is_leaf=lambda v: isinstance(v, _Pair))
        return target(*args, **kwargs)


class _NoRule(Exception):
    """The rule does not cover these arguments: the op runs on complex tensors."""


def _pair_args(*values):
    """The pairs of complex `values`; _NoRule where one is neither complex nor a pair."""
    pairs = [_as_pair(v) for v in values]
    if any(p is None for p in pairs):
        raise _NoRule
    return pairs


def _dim(d, rank):
    return d + rank if d < 0 else d


def _pair_of(re, im):
    shape = list(torch.broadcast_shapes(re.shape, im.shape))
    re, im = (t if list(t.shape) == shape else aten.expand.default(t, shape) for t in (re, im))
    return _Pair(aten.cat.default([aten.unsqueeze.default(re, -1), aten.unsqueeze.default(im, -1)], -1))


def _parts(p):
    return aten.select.int(p.real, -1, 0), aten.select.int(p.real, -1, 1)


def _to_copy(x, *, dtype=None, layout=None, device=None, pin_memory=None, non_blocking=False, memory_format=None):
    where = x.real.device if isinstance(x, _Pair) else x.device
    if (device is not None and torch.device(device) != where) or layout not in (None, torch.strided) or non_blocking:
        raise _NoRule  # a move between devices, another layout: PyTorch's
    if isinstance(x, torch.Tensor) and not x.dtype.is_complex:
        if dtype not in _REAL:
            return None  # a real cast: not this pass's
        if memory_format not in (None, torch.contiguous_format) and not x.is_contiguous():
            raise _NoRule  # PyTorch keeps the input's layout
        real = aten._to_copy.default(x, dtype=_REAL[dtype])
        return _Pair(aten.constant_pad_nd.default(aten.unsqueeze.default(real, -1), [0, 1], 0.0))
    (p,) = _pair_args(x)
    if dtype is not None and dtype not in _REAL:
        raise _NoRule  # to a real dtype: PyTorch drops the imaginary part, with a warning
    return _Pair(aten._to_copy.default(p.real, dtype=_REAL[dtype]) if dtype is not None else aten.clone.default(p.real))


def _complex(re, im):
    return _pair_of(re, im)


def _polar(magnitude, angle):
    return _pair_of(aten.mul.Tensor(magnitude, aten.cos.default(angle)), aten.mul.Tensor(magnitude, aten.sin.default(angle)))


def _view_as_complex(x):
    if x.dtype not in _COMPLEX:
        raise _NoRule
    return _Pair(x)


def _view_as_real(c):
    return _pair_args(c)[0].real


def _conj(c):
    (p,) = _pair_args(c)
    re, im = _parts(p)
    return _pair_of(re, aten.neg.default(im))


def _clone(c, memory_format=None):
    (p,) = _pair_args(c)
    if memory_format not in (None, torch.contiguous_format, torch.preserve_format):
        raise _NoRule
    return _Pair(aten.clone.default(p.real, memory_format=memory_format) if memory_format else aten.clone.default(p.real))


def _slice(c, dim=0, start=None, end=None, step=1):
    (p,) = _pair_args(c)
    return _Pair(aten.slice.Tensor(p.real, _dim(dim, p.dim), start, end, step))


def _pad(c, pad, value=0.0):
    (p,) = _pair_args(c)
    if value != 0:
        raise _NoRule
    return _Pair(aten.constant_pad_nd.default(p.real, [0, 0] + list(pad), 0.0))


def _permute(c, dims):
    (p,) = _pair_args(c)
    return _Pair(aten.permute.default(p.real, [_dim(d, p.dim) for d in dims] + [p.dim]))


def _squeeze(c, dims):
    (p,) = _pair_args(c)
    dims = [dims] if isinstance(dims, int) else dims
    return _Pair(aten.squeeze.dims(p.real, [_dim(d, p.dim) for d in dims]))


def _unsqueeze(c, dim):
    (p,) = _pair_args(c)
    return _Pair(aten.unsqueeze.default(p.real, _dim(dim, p.dim + 1)))


def _resolve(shape, numel):
    shape = list(shape)
    if -1 in shape:
        known = 1
        for s in shape:
            known *= s if s != -1 else 1
        shape[shape.index(-1)] = numel // known if known else 0
    return shape


def _view(c, shape):
    (p,) = _pair_args(c)
    return _Pair(aten.view.default(p.real, _resolve(shape, p.real.numel() // 2) + [2]))


def _expand(c, sizes, implicit=False):
    (p,) = _pair_args(c)
    lead = len(sizes) - p.dim
    sizes = [p.shape[i - lead] if s == -1 else s for i, s in enumerate(sizes)]
    return _Pair(aten.expand.default(p.real, sizes + [2]))


def _select(c, dim, index):
    (p,) = _pair_args(c)
    return _Pair(aten.select.int(p.real, _dim(dim, p.dim), index))


def _repeat(c, repeats):
    (p,) = _pair_args(c)
    return _Pair(aten.repeat.default(p.real, list(repeats) + [1]))


def _cat(tensors, dim=0):
    pairs = _pair_args(*tensors)
    rank = max(p.dim for p in pairs)
    if any(p.dim != rank for p in pairs):
        raise _NoRule  # cat's legacy empty 1-d tensors
    return _Pair(aten.cat.default([p.real for p in pairs], _dim(dim, rank)))


def _where(condition, a, b):
    pa, pb = _pair_args(a, b)
    return _Pair(aten.where.self(aten.unsqueeze.default(condition, -1), pa.real, pb.real))


def _real_operand(v, pair):
    """A real tensor or number meeting a complex pair, where it leaves the complex dtype as it
    is (a Python number; a tensor of the pair's real dtype, an integer or bool one); else
    _NoRule (PyTorch would promote the complex dtype)."""
    if isinstance(v, torch.Tensor):
        if v.dtype.is_complex or (v.dtype.is_floating_point and v.dtype != pair.real.dtype):
            raise _NoRule
        return v
    if isinstance(v, complex) or not isinstance(v, (int, float)):
        raise _NoRule
    return v


def _add_or_sub(sign):
    op = aten.add.Tensor if sign > 0 else aten.sub.Tensor

    def rule(a, b, alpha=1):
        if isinstance(alpha, complex):
            raise _NoRule
        pa, pb = _as_pair(a), _as_pair(b)
        if pa is not None and pb is not None:
            return _Pair(op(pa.real, pb.real, alpha=alpha))
        if pa is not None:  # complex ± real: the real part moves
            re, im = _parts(pa)
            return _pair_of(op(re, _real_operand(b, pa), alpha=alpha), im)
        if pb is not None:  # real ± complex
            re, im = _parts(pb)
            return _pair_of(op(_real_operand(a, pb), re, alpha=alpha), im if sign > 0 else aten.mul.Tensor(im, -alpha))
        raise _NoRule
    return rule


def _mul(a, b):
    pa, pb = _as_pair(a), _as_pair(b)
    if pa is not None and pb is not None:
        (ar, ai), (br, bi) = _parts(pa), _parts(pb)
        return _pair_of(aten.sub.Tensor(aten.mul.Tensor(ar, br), aten.mul.Tensor(ai, bi)),
                        aten.add.Tensor(aten.mul.Tensor(ar, bi), aten.mul.Tensor(ai, br)))
    if pa is not None or pb is not None:
        pair, other = (pa, b) if pa is not None else (pb, a)
        re, im = _parts(pair)
        factor = _real_operand(other, pair)
        return _pair_of(aten.mul.Tensor(re, factor), aten.mul.Tensor(im, factor))
    raise _NoRule


def _neg(c):
    (p,) = _pair_args(c)
    return _Pair(aten.neg.default(p.real))


def _abs(c):
    p = _as_pair(c)
    if p is None:
        return None  # a real abs
    return aten.hypot.default(*_parts(p))


_RULES = {
    "aten._to_copy.default": _to_copy,
    "aten.complex.default": _complex,
    "aten.polar.default": _polar,
    "aten.view_as_complex.default": _view_as_complex,
    "aten.view_as_real.default": _view_as_real,
    "aten._conj.default": _conj,
    "aten._conj_physical.default": _conj,
    "aten.conj_physical.default": _conj,
    "aten.clone.default": _clone,
    "aten.slice.Tensor": _slice,
    "aten.constant_pad_nd.default": _pad,
    "aten.permute.default": _permute,
    "aten.squeeze.dims": _squeeze,
    "aten.squeeze.dim": _squeeze,
    "aten.unsqueeze.default": _unsqueeze,
    "aten.view.default": _view,
    "aten._unsafe_view.default": _view,
    "aten.expand.default": _expand,
    "aten.select.int": _select,
    "aten.repeat.default": _repeat,
    "aten.cat.default": _cat,
    "aten.where.self": _where,
    "aten.add.Tensor": _add_or_sub(1),
    "aten.sub.Tensor": _add_or_sub(-1),
    "aten.mul.Tensor": _mul,
    "aten.neg.default": _neg,
    "aten.abs.default": _abs,
}
