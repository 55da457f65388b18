"""The decompositions the adapter applies: PyTorch's Core ATen table for every graph, and for
graphs holding ops coil does not compile, Inductor's table and a few of coil's own for those
ops (their parts are often ops coil compiles), applied by tracing the graph again.
"""
import functools

import torch

from . import _coil, _foreach, _fx, _gradients

aten = torch.ops.aten


def core(training=False):
    """The table AOTAutograd applies to every graph. A graph that needs gradients also has its
    softmaxes decomposed (amax, exp, sum, log), as Inductor does: the partitioner then saves their
    row statistics and the backward computes the values again from the input, instead of saving
    them in f32 (GPT-2's loss saved its [8192, 50257] f32 log-softmax: 1.65 GB). Made once per
    process (PyTorch's Core ATen table takes about 0.17 s to make, a third of a small graph's
    compile); each call gets its own copy."""
    return dict(_core_table(training))


@functools.lru_cache(maxsize=2)
def _core_table(training):
    from torch._decomp import core_aten_decompositions, decompositions

    table = dict(core_aten_decompositions())
    if training:
        table[aten._log_softmax.default] = decompositions._log_softmax
        table[aten._softmax.default] = decompositions._softmax
    # Keep attention whole: coil has a fused kernel for it; addcdiv / addcmul whole: coil
    # computes them in f32 and rounds once, as ATen does (the table's div/mul/add round each).
    for op in (aten._scaled_dot_product_flash_attention_for_cpu.default, aten.addcdiv.default, aten.addcmul.default):
        table.pop(op, None)
    table.update(_foreach.table())  # an optimizer's step: per-tensor ops, fused per parameter
    table[aten._softmax_backward_data.default] = functools.partial(_softmax_backward,
                                                                   table[aten._softmax_backward_data.default])
    return table


def _softmax_backward(table_fn, grad_output, output, dim, input_dtype):
    # CUDA's kernel multiplies grad_output by output in their 16-bit dtype (a rounded tensor),
    # then sums and finishes in f32: the table's decomposition keeps the product in f32, up to
    # 16 units in the last place off where the sum cancels. The CPU kernel keeps it in f32.
    if grad_output.device.type != "cuda" or grad_output.dtype not in (torch.float16, torch.bfloat16) \
            or output.dtype != grad_output.dtype:
        return table_fn(grad_output, output, dim, input_dtype)
    product = aten._to_copy.default(aten.mul.Tensor(grad_output, output), dtype=torch.float32)
    o = aten._to_copy.default(output, dtype=torch.float32)
    grad = aten.sub.Tensor(product, aten.mul.Tensor(o, aten.sum.dim_IntList(product, [dim], True)))
    return aten._to_copy.default(grad, dtype=input_dtype)


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


def _searchsorted(sorted_sequence, self, *, out_int32=False, right=False, side=None, sorter=None):
    # The count of boundaries below each value (at or below it for right / side="right"): what a
    # binary search finds in a sorted sequence, NaN counting as larger than everything, as in
    # ATen's search (!(b >= v) moves right).
    seq = aten.gather.default(sorted_sequence, -1, sorter) if sorter is not None else sorted_sequence
    values = aten.unsqueeze.default(self, -1)
    if seq.dim() > 1:
        seq = aten.unsqueeze.default(seq, -2)
    above = aten.gt.Tensor(seq, values) if right or side == "right" else aten.ge.Tensor(seq, values)
    return aten.sum.dim_IntList(aten.logical_not.default(above), [-1], dtype=torch.int32 if out_int32 else torch.int64)


def _bucketize(self, boundaries, *, out_int32=False, right=False):
    return _searchsorted(boundaries, self, out_int32=out_int32, right=right)


def _trilinear(i1, i2, i3, expand1, expand2, expand3, sumdim, unroll_dim=1):
    # i1 * i2 * i3, each unsqueezed at its expand dims, summed over sumdim (which go away);
    # 16-bit operands in f32, rounded once.
    dtype = i1.dtype
    if dtype in (torch.float16, torch.bfloat16):
        i1, i2, i3 = (aten._to_copy.default(t, dtype=torch.float32) for t in (i1, i2, i3))

    def spread(t, expand):
        for d in sorted(expand):
            t = aten.unsqueeze.default(t, d)
        return t

    out = aten.mul.Tensor(aten.mul.Tensor(spread(i1, expand1), spread(i2, expand2)), spread(i3, expand3))
    out = aten.sum.dim_IntList(out, list(sumdim)) if sumdim else out
    return aten._to_copy.default(out, dtype=dtype) if out.dtype != dtype else out


def _unfold(self, dimension, size, step):
    # Windows of `size` every `step` along a dim, as a gather: self[..., i * step + j, ...] at
    # [..., i, ..., j] (the window's dim last).
    if self.dim() == 0:  # a one-element row: windows of size 0 or 1
        return aten.view.default(_unfold(aten.view.default(self, [1]), 0, size, step), [size])
    if size > self.shape[dimension % self.dim()] or step <= 0:
        raise NotImplementedError("an unfold eager refuses")
    d = dimension % self.dim()
    count = (self.shape[d] - size) // step + 1
    starts = aten.mul.Tensor(aten.arange.start_step(0, count, dtype=torch.int64, device=self.device), step)
    index = aten.add.Tensor(aten.unsqueeze.default(starts, 1), aten.arange.start_step(0, size, dtype=torch.int64, device=self.device))
    picked = aten.index.Tensor(self, [None] * d + [index])
    order = list(range(picked.dim()))
    order.append(order.pop(d + 1))
    return aten.permute.default(picked, order)


def _diagonal_scatter(self, src, offset=0, dim1=0, dim2=1):
    # An index_put at the diagonal's positions; src's last dim (the diagonal) goes where
    # advanced indexing puts the indexed dims (in place when adjacent, else first).
    r = self.dim()
    d1, d2 = dim1 % r, dim2 % r
    if d1 == d2:
        raise NotImplementedError("diagonal_scatter with dim1 == dim2")
    n = src.shape[-1]
    along = aten.arange.start_step(0, n, dtype=torch.int64, device=self.device)
    indices = [None] * r
    indices[d1] = aten.add.Tensor(along, max(-offset, 0))
    indices[d2] = aten.add.Tensor(along, max(offset, 0))
    at = min(d1, d2) if abs(d1 - d2) == 1 else 0
    order = list(range(src.dim()))
    order.insert(at, order.pop())
    return aten.index_put.default(self, indices, aten.permute.default(src, order))


def _pool_size(n, k, s, p, ceil_mode):
    """A pooled dim's length (the last window starts inside the input or its left padding)."""
    out = (n + 2 * p - k + (s - 1 if ceil_mode else 0)) // s + 1
    return out - 1 if ceil_mode and (out - 1) * s >= n + p else out


def _avg_pool3d(self, kernel_size, stride=(), padding=0, ceil_mode=False, count_include_pad=True, divisor_override=None):
    # Window sums of the zero-padded input (gathers, as unfold), over the count of elements each
    # window has inside the padded input (count_include_pad) or the input: ATen's divisor, a
    # window clipped at the padded input's right end. 16-bit inputs summed in f32, rounded once.
    three = lambda v: list(v) * 3 if len(v) == 1 else list(v)  # noqa: E731
    k = three(kernel_size)
    st = three(stride) if stride else k
    p = three([padding] if isinstance(padding, int) else padding)
    lead = self.dim() - 3
    dtype = self.dtype
    x = aten._to_copy.default(self, dtype=torch.float32) if dtype in (torch.float16, torch.bfloat16) else self
    sizes = [self.shape[lead + d] for d in range(3)]
    outs = [_pool_size(sizes[d], k[d], st[d], p[d], ceil_mode) for d in range(3)]
    right = [max(p[d], (outs[d] - 1) * st[d] + k[d] - sizes[d] - p[d]) for d in range(3)]
    pads = [v for d in (2, 1, 0) for v in (p[d], right[d])]
    windows = aten.constant_pad_nd.default(x, pads, 0.0)
    for d in range(3):
        windows = _unfold(windows, lead + d, k[d], st[d])
    total = aten.sum.dim_IntList(windows, [-3, -2, -1])
    if divisor_override:
        out = aten.div.Tensor(total, divisor_override)
    else:
        divisor = None
        for d in range(3):
            inside = sizes[d] + 2 * p[d] if count_include_pad else sizes[d]
            ones = aten.full.default([inside], 1.0, dtype=x.dtype, device=self.device)
            around = [0, right[d] - p[d]] if count_include_pad else [p[d], right[d]]
            count = aten.sum.dim_IntList(_unfold(aten.constant_pad_nd.default(ones, around, 0.0), 0, k[d], st[d]), [-1])
            shape = [1, 1, 1]
            shape[d] = -1
            count = aten.view.default(count, shape)
            divisor = count if divisor is None else aten.mul.Tensor(divisor, count)
        out = aten.div.Tensor(total, divisor)
    return aten._to_copy.default(out, dtype=dtype) if out.dtype != dtype else out


def _adaptive_windows(x, dim, out):
    """x's adaptive windows along `dim` (window i: [floor(i n / out), ceil((i + 1) n / out))),
    gathered at the widest window's width K: (windows, with the dim replaced by out and K
    last; which of the K are inside each window, [out, K])."""
    n = x.shape[dim]
    width = max(-(-(i + 1) * n // out) - i * n // out for i in range(out))
    i = aten.arange.start_step(0, out, dtype=torch.int64, device=x.device)
    per = aten.scalar_tensor.default(out, dtype=torch.int64, device=x.device)
    start = aten.div.Tensor_mode(aten.mul.Tensor(i, n), per, rounding_mode="floor")
    end = aten.div.Tensor_mode(aten.add.Tensor(aten.mul.Tensor(i, n), n + out - 1), per, rounding_mode="floor")
    offsets = aten.arange.start_step(0, width, dtype=torch.int64, device=x.device)
    inside = aten.lt.Tensor(offsets, aten.unsqueeze.default(aten.sub.Tensor(end, start), 1))
    at = aten.clamp.default(aten.add.Tensor(aten.unsqueeze.default(start, 1), offsets), None, n - 1)
    picked = aten.index.Tensor(x, [None] * dim + [at])
    order = list(range(picked.dim()))
    order.append(order.pop(dim + 1))
    return aten.permute.default(picked, order), inside


def _positions(sizes, device, pads=None):
    """The flat position of each element of a tensor of `sizes` (-1 in the padding `pads`)."""
    count = 1
    for n in sizes:
        count *= n
    pos = aten.view.default(aten.arange.start_step(0, count, dtype=torch.int64, device=device), list(sizes))
    return aten.constant_pad_nd.default(pos, pads, -1) if pads else pos


def _best_of_windows(x, pos, inside, nd):
    """The largest element of each window (x: [..., outs, Ks], NaN first, positions outside the
    windows never) and its flat position (pos: [outs, Ks])."""
    flat = lambda t: aten.view.default(aten.clone.default(t, memory_format=torch.contiguous_format), list(t.shape[:-nd]) + [-1])  # noqa: E731
    x, pos = flat(x), flat(pos)
    if not x.dtype.is_floating_point:
        # Integers: the first element inside the window (a position, not padding) that equals
        # the window's largest.
        real = aten.ge.Scalar(aten.expand.default(pos, list(x.shape)), 0)
        if inside is not None:
            real = aten.logical_and.default(real, flat(inside))
        top = aten.amax.default(x, [-1], True)
        first = aten._to_copy.default(aten.logical_and.default(aten.eq.Tensor(x, top), real), dtype=torch.int32)
        best = aten.argmax.default(first, -1, True)
        values = aten.squeeze.dims(aten.gather.default(x, -1, best), [-1])
        return values, aten.squeeze.dims(aten.gather.default(aten.expand.default(pos, list(x.shape)), -1, best), [-1])
    if inside is not None:
        x = aten.where.self(flat(inside), x, aten.scalar_tensor.default(float("-inf"), dtype=x.dtype, device=x.device))
    best = aten.argmax.default(x, -1, True)
    values = aten.squeeze.dims(aten.gather.default(x, -1, best), [-1])
    index = aten.squeeze.dims(aten.gather.default(aten.expand.default(pos, list(x.shape)), -1, best), [-1])
    return values, index


def _adaptive_pool(x, output_size, reduce):
    """Adaptive pooling over x's last len(output_size) dims: each dim's windows gathered in turn,
    then reduced together: "avg" the mean of the elements inside, "max" the largest with its flat
    position among the pooled dims."""
    nd = len(output_size)
    lead = x.dim() - nd
    if not x.dtype.is_floating_point or any(o <= 0 for o in output_size):
        raise NotImplementedError("adaptive pooling of integers or to an empty size")
    pos = _positions(x.shape[lead:], x.device)
    inside = None
    for d in range(nd):
        x, inside_d = _adaptive_windows(x, lead + d, output_size[d])
        pos, _ = _adaptive_windows(pos, d, output_size[d])
        shape = [1] * (2 * nd)
        shape[d], shape[nd + d] = inside_d.shape
        m = aten.view.default(inside_d, shape)
        inside = m if inside is None else aten.logical_and.default(inside, m)
    inside = aten.expand.default(inside, list(x.shape[lead:]))
    if reduce == "max":
        return _best_of_windows(x, pos, inside, nd)
    acc = torch.float32 if x.dtype in (torch.float16, torch.bfloat16) else x.dtype
    zero = aten.scalar_tensor.default(0.0, dtype=acc, device=x.device)
    total = aten.sum.dim_IntList(aten.where.self(inside, aten._to_copy.default(x, dtype=acc), zero), list(range(-nd, 0)))
    count = aten.sum.dim_IntList(inside, list(range(-nd, 0)), dtype=acc)
    return aten._to_copy.default(aten.div.Tensor(total, count), dtype=x.dtype)


def _max_pool3d_with_indices(self, kernel_size, stride=(), padding=0, dilation=1, ceil_mode=False):
    # The windows of the (-inf) padded input, their elements `dilation` apart, gathered with
    # each element's flat position in the input (-1 in the padding, which never wins but where
    # a window holds only -inf).
    if self.dtype == torch.bool:
        raise NotImplementedError("max_pool3d of booleans")
    three = lambda v: [v] * 3 if isinstance(v, int) else (list(v) * 3 if len(v) == 1 else list(v))  # noqa: E731
    k, p, dl = three(kernel_size), three(padding), three(dilation)
    st = three(stride) if stride else k
    lead = self.dim() - 3
    sizes = [self.shape[lead + d] for d in range(3)]
    span = [(k[d] - 1) * dl[d] + 1 for d in range(3)]
    outs = [_pool_size(sizes[d], span[d], st[d], p[d], ceil_mode) for d in range(3)]
    right = [max(p[d], (outs[d] - 1) * st[d] + span[d] - sizes[d] - p[d]) for d in range(3)]
    pads = [v for d in (2, 1, 0) for v in (p[d], right[d])]
    lowest = float("-inf") if self.dtype.is_floating_point else torch.iinfo(self.dtype).min
    x = aten.constant_pad_nd.default(self, pads, lowest)
    pos = _positions(sizes, self.device, pads)
    for d in range(3):
        x, pos = _unfold(x, lead + d, span[d], st[d]), _unfold(pos, d, span[d], st[d])
        if dl[d] > 1:
            x, pos = (aten.slice.Tensor(t, -1, 0, None, dl[d]) for t in (x, pos))
    return _best_of_windows(x, pos, None, 3)


def _as_strided_scatter(self, src, size, stride, storage_offset=None):
    # src stored at the elements the strided view of self's storage reads: an index_put on
    # self flattened (a contiguous self, whose storage order is its flat order).
    if not self.is_contiguous():
        raise NotImplementedError("as_strided_scatter of a non-contiguous self")
    position = aten.scalar_tensor.default(storage_offset or 0, dtype=torch.int64, device=self.device)
    for d, (n, st) in enumerate(zip(size, stride)):
        shape = [1] * len(size)
        shape[d] = n
        step = aten.mul.Tensor(aten.arange.start_step(0, n, dtype=torch.int64, device=self.device), st)
        position = aten.add.Tensor(position, aten.view.default(step, shape))
    flat = aten.view.default(aten.clone.default(self), [-1])
    put = aten.index_put.default(flat, [aten.view.default(aten.clone.default(aten.expand.default(position, list(size))), [-1])],
                                 aten.view.default(aten.clone.default(src, memory_format=torch.contiguous_format), [-1]))
    return aten.view.default(put, list(self.shape))


def _new_empty_strided(self, size, stride, *, dtype=None, layout=None, device=None, pin_memory=None):
    return aten.empty_strided.default(size, stride, dtype=dtype or self.dtype, device=device or self.device)


def _unbind(self, dim=0):
    return [aten.select.int(self, dim, i) for i in range(self.shape[dim])]


# coil's own, for ops neither table rewrites into parts coil compiles (PyTorch's semantics:
# floor_divide floors; addbmm adds the batch's products; lift_fresh_copy is a copy;
# index_reduce / index_add are scatters along one dim; masked_scatter reads source in order;
# searchsorted / bucketize count the boundaries below; unfold and diagonal_scatter index;
# the 3-d and adaptive pools reduce gathered windows; max pooling's gradient gathers).
_OWN = {
    aten.var_mean.correction: _var_mean,
    aten.addbmm.default: _addbmm,
    aten.stack.default: _stack,
    aten.floor_divide.default: _floor_divide,
    aten.lift_fresh_copy.default: aten.clone.default,
    aten.index_reduce.default: _index_reduce,
    aten.index_add.default: _index_add,
    aten.masked_scatter.default: _masked_scatter,
    aten.searchsorted.Tensor: _searchsorted,
    aten.bucketize.Tensor: _bucketize,
    aten._trilinear.default: _trilinear,
    aten.unfold.default: _unfold,
    aten.diagonal_scatter.default: _diagonal_scatter,
    aten.as_strided_copy.default: lambda self, size, stride, storage_offset=None: aten.clone.default(
        aten.as_strided.default(self, size, stride, storage_offset)),
    aten.new_empty_strided.default: _new_empty_strided,
    aten.as_strided_scatter.default: _as_strided_scatter,
    aten.unbind.int: _unbind,
    aten.avg_pool3d.default: _avg_pool3d,
    aten.max_pool3d_with_indices.default: _max_pool3d_with_indices,
    aten.max_pool2d_with_indices_backward.default: _gradients.max_pool2d_with_indices_backward,
    aten.avg_pool2d_backward.default: _gradients.avg_pool2d_backward,
    aten.convolution_backward.default: _gradients.convolution_backward,
    aten.adaptive_max_pool2d.default: lambda self, output_size: _adaptive_pool(self, output_size, "max"),
    aten.adaptive_max_pool3d.default: lambda self, output_size: _adaptive_pool(self, output_size, "max"),
    aten._adaptive_avg_pool3d.default: lambda self, output_size: _adaptive_pool(self, output_size, "avg"),
    aten.expand_as.default: lambda self, other: aten.expand.default(self, list(other.shape)),
    aten.split.Tensor: lambda self, split_size, dim=0: aten.split_with_sizes.default(
        self, [min(split_size, self.shape[dim] - i) for i in range(0, self.shape[dim], split_size)] or [0], dim),
    aten.split.sizes: lambda self, split_size, dim=0: aten.split_with_sizes.default(self, list(split_size), dim),
    aten.split.default: lambda self, split_sizes, dim=0: aten.split_with_sizes.default(self, list(split_sizes), dim),
    aten.lift_fresh.default: aten.alias.default,
    # The legacy entry point (TorchScript-era code): its backend flags choose no arithmetic.
    aten._convolution.default: lambda input, weight, bias, stride, padding, dilation, transposed, output_padding,
    groups, *flags: aten.convolution.default(input, weight, bias, stride, padding, dilation, transposed,
                                             output_padding, groups),
    # F.grid_sample's choice on CUDA for 4-d bilinear sampling with zero padding, corners aligned.
    aten.cudnn_grid_sampler.default: lambda self, grid: aten.grid_sampler_2d.default(self, grid, 0, 0, True),
    torch.ops.prims.convert_element_type.default: lambda a, dtype: aten._to_copy.default(a, dtype=dtype),
    torch.ops.prims.scalar_tensor.default: lambda s, *, dtype=None, device=None: aten.scalar_tensor.default(
        s, dtype=dtype, device=device),
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
    # The graph's constants (get_attr tensors, e.g. a torch.tensor([...]) index) are real tensors.
    allowed = fake_mode.allow_non_fake_inputs
    fake_mode.allow_non_fake_inputs = True
    try:
        with fake_mode:
            return make_fx(gm, decomposition_table=table)(*values)
    except Exception:  # noqa: BLE001 - a decomposition that does not apply here: keep the ops
        return None
    finally:
        fake_mode.allow_non_fake_inputs = allowed
