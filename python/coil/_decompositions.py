"""The decompositions the adapter applies: PyTorch's Core ATen table for every graph, and for
graphs holding ops coil does not compile, Inductor's table and a few of coil's own for those
ops (their parts are often ops coil compiles), applied by tracing the graph again.
"""
import functools

import torch

from . import _coil, _fx

aten = torch.ops.aten


def core():
    """The table AOTAutograd applies to every graph."""
    from torch._decomp import core_aten_decompositions

    table = dict(core_aten_decompositions())
    # Keep attention whole: coil has a fused kernel for it.
    for op in (aten._scaled_dot_product_flash_attention_for_cpu.default,):
        table.pop(op, None)
    return table


def _var_mean(x, dim=None, *, correction=None, keepdim=False):
    return aten.var.correction(x, dim, correction=correction, keepdim=keepdim), aten.mean.dim(x, dim, keepdim)


def _addbmm(self, batch1, batch2, *, beta=1, alpha=1):
    # 16-bit operands: the products summed over the batch in f32 and rounded once, as ATen does.
    dtype = self.dtype
    if dtype in (torch.float16, torch.bfloat16):
        self, batch1, batch2 = (aten._to_copy.default(t, dtype=torch.float32) for t in (self, batch1, batch2))
    # One product over the batch and inner dims together: [n, B*m] @ [B*m, p], one accumulation
    # as ATen's addbmm makes (a bmm, then a sum, rounded and ordered differently).
    b, n, m = batch1.shape
    left = aten.view.default(aten.clone.default(aten.permute.default(batch1, [1, 0, 2]),
                                                memory_format=torch.contiguous_format), [n, b * m])
    product = aten.mm.default(left, aten.view.default(aten.clone.default(batch2, memory_format=torch.contiguous_format),
                                                      [b * m, batch2.shape[2]]))
    if alpha != 1:
        product = aten.mul.Scalar(product, alpha)
    if beta == 0:
        out = aten.expand.default(product, self.shape) if product.shape != self.shape else product
    else:
        out = aten.add.Tensor(aten.mul.Scalar(self, beta) if beta != 1 else self, product)
    return aten._to_copy.default(out, dtype=dtype) if out.dtype != dtype else out


def _stack(tensors, dim=0):
    dim = dim % (tensors[0].dim() + 1)
    return aten.cat.default([aten.unsqueeze.default(t, dim) for t in tensors], dim)


def _floor_divide(self, other):
    return aten.div.Tensor_mode(self, other, rounding_mode="floor")


def _along(self, dim, index, source):
    """index_add / index_reduce as a scatter: (dim, the index of every element of source, source).
    The index is int64 (as scatters take), the same along source's other dims; 0-d tensors
    count as one element."""
    if index.dtype != torch.int64:
        index = aten._to_copy.default(index, dtype=torch.int64)
    if self.dim() == 0:
        return 0, aten.view.default(index, []), aten.view.default(source, []) if source.dim() else source
    if source.dim() == 0:
        source = aten.view.default(source, [1] * self.dim())
    dim = dim % self.dim()
    shape = [1] * source.dim()
    shape[dim] = -1
    return dim, aten.expand.default(aten.view.default(index, shape), list(source.shape)), source


def _index_reduce(self, dim, index, source, reduce, *, include_self=True):
    dim, index, source = _along(self, dim, index, source)
    return aten.scatter_reduce.two(self, dim, index, source, reduce, include_self=include_self)


def _index_add(self, dim, index, source, *, alpha=1):
    dim, index, source = _along(self, dim, index, source)
    if alpha != 1:
        source = aten.mul.Scalar(source, alpha)
    return aten.scatter_add.default(self, dim, index, source)


def _masked_scatter(self, mask, source):
    # The selected elements take source's elements in order: position i reads source at the
    # count of selected elements before it.
    if source.numel() == 0:
        raise NotImplementedError("masked_scatter from an empty source")
    shape = list(torch.broadcast_shapes(self.shape, mask.shape))
    self_b = aten.expand.default(self, shape) if list(self.shape) != shape else self
    mask_b = aten.expand.default(mask, shape) if list(mask.shape) != shape else mask
    flat_mask = aten.view.default(aten.clone.default(mask_b, memory_format=torch.contiguous_format), [-1])
    order = aten.sub.Tensor(aten.cumsum.default(flat_mask, 0), 1)
    order = aten.clamp.default(order, 0)
    flat_source = aten.view.default(aten.clone.default(source, memory_format=torch.contiguous_format), [-1])
    taken = aten.index.Tensor(flat_source, [order])
    flat_self = aten.view.default(aten.clone.default(self_b, memory_format=torch.contiguous_format), [-1])
    return aten.view.default(aten.where.self(flat_mask, taken, flat_self), shape)


# coil's own, for ops neither table rewrites into parts coil compiles (PyTorch's semantics:
# floor_divide floors; addbmm adds the batch's products; lift_fresh_copy is a copy;
# index_reduce / index_add are scatters along one dim; masked_scatter reads source in order).
_OWN = {
    aten.var_mean.correction: _var_mean,
    aten.addbmm.default: _addbmm,
    aten.stack.default: _stack,
    aten.floor_divide.default: _floor_divide,
    aten.lift_fresh_copy.default: aten.clone.default,
    aten.index_reduce.default: _index_reduce,
    aten.index_add.default: _index_add,
    aten.masked_scatter.default: _masked_scatter,
}


def _compiles(op):
    target = _fx.target_name(op)
    return target is not None and _coil.supported(target)


@functools.lru_cache(maxsize=None)
def _extra():
    """Inductor's decompositions and coil's own, for the ops coil does not compile."""
    from torch._inductor.decomposition import select_decomp_table

    table = {op: fn for op, fn in select_decomp_table().items() if isinstance(op, torch._ops.OpOverload) and not _compiles(op)}
    table.update(_OWN)
    return table


def decompose_unsupported(gm, values, unsupported):
    """`gm` traced again with the extra decompositions, or None where none applies to the ops
    in `unsupported` (or tracing fails: those nodes then run in eager as they are)."""
    from torch._guards import detect_fake_mode
    from torch.fx.experimental.proxy_tensor import make_fx

    table = _extra()
    fake_mode = detect_fake_mode(values)
    if fake_mode is None or not any(n.target in table for n in unsupported):
        return None
    try:
        with fake_mode:
            return make_fx(gm, decomposition_table=table)(*values)
    except Exception:  # noqa: BLE001 - a decomposition that does not apply here: keep the ops
        return None
