"""The _foreach_* ops (a compiled optimizer step: torch.optim's foreach implementations) as the
per-tensor op on each element of their lists, which coil compiles and fuses: every parameter's
update becomes one kernel over that parameter (its chain of pointwise ops fused).
"""
import torch

aten = torch.ops.aten

_UNARY = ("abs", "acos", "asin", "atan", "ceil", "cos", "cosh", "erf", "erfc", "exp", "expm1", "floor", "frac",
          "lgamma", "log", "log10", "log1p", "log2", "neg", "reciprocal", "round", "rsqrt", "sigmoid", "sign",
          "sin", "sinh", "sqrt", "tan", "tanh", "trunc")

# Per binary op and foreach overload: the per-tensor op taking (tensor, other element).
_BINARY = {
    "add": {"List": aten.add.Tensor, "Tensor": aten.add.Tensor, "Scalar": aten.add.Scalar, "ScalarList": aten.add.Scalar},
    "sub": {"List": aten.sub.Tensor, "Scalar": aten.sub.Scalar, "ScalarList": aten.sub.Scalar},
    "mul": {"List": aten.mul.Tensor, "Tensor": aten.mul.Tensor, "Scalar": aten.mul.Scalar, "ScalarList": aten.mul.Scalar},
    "div": {"List": aten.div.Tensor, "Tensor": aten.div.Tensor, "Scalar": aten.div.Scalar, "ScalarList": aten.div.Scalar},
    "pow": {"List": aten.pow.Tensor_Tensor, "Scalar": aten.pow.Tensor_Scalar, "ScalarList": aten.pow.Tensor_Scalar},
    "clamp_min": {"List": aten.clamp_min.Tensor, "Scalar": aten.clamp_min.default, "ScalarList": aten.clamp_min.default},
    "clamp_max": {"List": aten.clamp_max.Tensor, "Scalar": aten.clamp_max.default, "ScalarList": aten.clamp_max.default},
    "maximum": {"List": aten.maximum.default, "Scalar": aten.clamp_min.default, "ScalarList": aten.clamp_min.default},
    "minimum": {"List": aten.minimum.default, "Scalar": aten.clamp_max.default, "ScalarList": aten.clamp_max.default},
}


def _elements(value, count):
    """A list argument as it is, any other repeated for every element."""
    return list(value) if isinstance(value, (list, tuple)) else [value] * count


def _unary(op):
    return lambda self: [op(x) for x in self]


def _binary(op):
    def apply(self, other, *, alpha=None):
        extra = {} if alpha is None or alpha == 1 else {"alpha": alpha}
        return [op(x, y, **extra) for x, y in zip(self, _elements(other, len(self)))]
    return apply


def _pointwise3(op):
    # addcdiv / addcmul: self + value * (tensor1 op tensor2).
    def apply(self, a, b, value=1):
        return [op(x, y, z, value=v) for x, y, z, v in zip(self, a, b, _elements(value, len(self)))]
    return apply


def _lerp(op):
    return lambda self, end, weight: [op(x, y, w) for x, y, w in zip(self, end, _elements(weight, len(self)))]


def _norm(self, ord=2, dtype=None):
    return [aten.linalg_vector_norm.default(x, ord, dtype=dtype) for x in self]


def table():
    """OpOverload -> decomposition, for every _foreach_* op coil takes."""
    out = {}
    for name in _UNARY:
        out[getattr(aten, f"_foreach_{name}").default] = _unary(getattr(aten, name).default)
    for name, overloads in _BINARY.items():
        for overload, op in overloads.items():
            out[getattr(getattr(aten, f"_foreach_{name}"), overload)] = _binary(op)
    out[aten._foreach_pow.ScalarAndTensor] = lambda self, exponent: [aten.pow.Scalar(self, e) for e in exponent]
    for name in ("addcdiv", "addcmul"):
        op = getattr(aten, name).default
        out[getattr(aten, f"_foreach_{name}").Scalar] = _pointwise3(op)
        out[getattr(aten, f"_foreach_{name}").ScalarList] = _pointwise3(op)
    out[aten._foreach_lerp.List] = _lerp(aten.lerp.Tensor)
    out[aten._foreach_lerp.Scalar] = _lerp(aten.lerp.Scalar)
    out[aten._foreach_lerp.ScalarList] = _lerp(aten.lerp.Scalar)
    out[aten._foreach_norm.Scalar] = _norm
    out[aten._foreach_max.default] = lambda self: [aten.amax.default(x, list(range(x.dim()))) for x in self]
    out[aten._foreach_zero.default] = lambda self: [aten.full_like.default(x, 0) for x in self]
    out[aten._foreach_copy.default] = lambda self, src, non_blocking=False: [aten.copy.default(x, s) for x, s in zip(self, src)]
    return out
