"""The backward ops of training graphs that coil compiles through their parts (coil's own
decompositions, applied like the rest of _decompositions' table to the ops coil does not take):
the 2-d pools' gradients as gathers of each element's windows, and convolution_backward as a
transposed convolution, products over the input's windows and a sum.
"""
import torch
from torch._prims_common import is_non_overlapping_and_dense_or_false

aten = torch.ops.aten


def _element_windows(sizes, outs, k, st, p, dl, dev):
    """For each input element of a 2-d pool and each kernel offset (i, j): the flat index of the
    window that holds the element as its (i, j) element, and whether one does ([k0 * k1, H * W]
    each). A pool's gradient gathers from these windows per element, not a scatter of windows."""
    def along(d):
        x = aten.arange.start_step(0, sizes[d], dtype=torch.int64, device=dev)
        i = aten.view.default(aten.arange.start_step(0, k[d], dtype=torch.int64, device=dev), [k[d], 1])
        start = aten.sub.Tensor(aten.add.Tensor(x, p[d]), aten.mul.Tensor(i, dl[d]))
        at = aten.div.Tensor_mode(start, st[d], rounding_mode="floor")
        exact = aten.eq.Scalar(aten.remainder.Scalar(start, st[d]), 0)
        inside = aten.logical_and.default(aten.ge.Scalar(start, 0), aten.lt.Scalar(at, outs[d]))
        return aten.clamp.default(at, 0, outs[d] - 1), aten.logical_and.default(exact, inside)

    (wh, vh), (ww, vw) = along(0), along(1)
    shape = [k[0] * k[1], sizes[0] * sizes[1]]
    window = _flat(aten.add.Tensor(aten.view.default(aten.mul.Tensor(wh, outs[1]), [k[0], 1, sizes[0], 1]),
                                   aten.view.default(ww, [1, k[1], 1, sizes[1]])), shape)
    valid = _flat(aten.logical_and.default(aten.view.default(vh, [k[0], 1, sizes[0], 1]),
                                           aten.view.default(vw, [1, k[1], 1, sizes[1]])), shape)
    return window, valid


def view_strides(sizes, strides, shape):
    """The strides of a view of a tensor of `sizes` and `strides` as `shape` (of the same number of
    elements), or None where no view exists. Dims merge or split only within runs of dims that
    are contiguous among themselves (each one's stride the next one's span), as in ATen."""
    sizes, strides, shape = list(sizes), list(strides), list(shape)
    if 0 in sizes:
        return [1] * len(shape)
    out = [0] * len(shape)
    v = len(shape) - 1
    base, run, made = (strides[-1] if strides else 1), 1, 1
    for d in range(len(sizes) - 1, -1, -1):
        run *= sizes[d]
        if d == 0 or (sizes[d - 1] != 1 and strides[d - 1] != run * base):  # a run of dims ends at d
            while v >= 0 and (made < run or shape[v] == 1):
                out[v] = made * base
                made *= shape[v]
                v -= 1
            if made != run:
                return None
            if d > 0:
                base, run, made = strides[d - 1], 1, 1
    while v >= 0 and shape[v] == 1:  # leading dims of 1
        out[v] = made * base
        v -= 1
    return out if v < 0 else None


def _flat(t, shape):
    """`t` as `shape`: a view where its layout allows one (a channels-last activation read as
    [N*H*W, C]), else a view of a dense copy. Decided from the strides, not by trying: a view
    that fails leaves its node in the traced graph, which PyTorch eager then fails on."""
    if view_strides(t.shape, t.stride(), shape) is not None:
        return aten.view.default(t, shape)
    return aten.view.default(aten.clone.default(t, memory_format=torch.contiguous_format), shape)


def _two(v):
    return [v, v] if isinstance(v, int) else (list(v) * 2 if len(v) == 1 else list(v))


def _pool_backward(grad_output, self, k, st, p, dl, hit):
    """A 2-d pool's input gradient: each element sums, in f32, the gradients of the windows that
    hold it (`hit(pick, window, valid)`: which of them count), rounded once; self's layout."""
    sizes, outs = list(self.shape[-2:]), list(grad_output.shape[-2:])
    window, valid = _element_windows(sizes, outs, k, st, p, dl, self.device)
    lead = list(self.shape[:-2])
    pick = lambda t: aten.index.Tensor(_flat(t, lead + [outs[0] * outs[1]]), [None] * len(lead) + [window])  # noqa: E731
    acc = torch.float32 if grad_output.dtype in (torch.float16, torch.bfloat16) else grad_output.dtype
    zero = aten.scalar_tensor.default(0.0, dtype=acc, device=self.device)
    taken = hit(pick, valid, aten._to_copy.default(grad_output, dtype=acc))
    total = aten.sum.dim_IntList(aten.where.self(taken[0], pick(taken[1]), zero), [-2])
    grad = aten._to_copy.default(aten.view.default(total, list(self.shape)), dtype=grad_output.dtype)
    if self.dim() == 4 and not self.is_contiguous() and self.is_contiguous(memory_format=torch.channels_last):
        return aten.clone.default(grad, memory_format=torch.channels_last)  # ATen's layout: self's
    return grad


def max_pool2d_with_indices_backward(grad_output, self, kernel_size, stride, padding, dilation, ceil_mode, indices):
    # An element takes the gradient of the windows whose max it was (indices: flat positions in H * W).
    sizes = list(self.shape[-2:])
    k = _two(kernel_size)

    def hit(pick, valid, grad):
        position = aten.arange.start_step(0, sizes[0] * sizes[1], dtype=torch.int64, device=self.device)
        return aten.logical_and.default(aten.eq.Tensor(pick(indices), position), valid), grad

    return _pool_backward(grad_output, self, k, _two(stride) if stride else k, _two(padding), _two(dilation), hit)


def avg_pool2d_backward(grad_output, self, kernel_size, stride, padding, ceil_mode, count_include_pad, divisor_override):
    # An element takes each window's gradient over the window's divisor (ATen's: the window
    # clipped at the padded input's right end, and at the input's ends unless count_include_pad).
    k = _two(kernel_size)
    st, p = _two(stride) if stride else k, _two(padding)
    sizes, outs = list(self.shape[-2:]), list(grad_output.shape[-2:])

    def hit(pick, valid, grad):
        if divisor_override:
            return valid, aten.div.Tensor(grad, divisor_override)
        divisor = None
        for d in range(2):
            start = aten.sub.Tensor(aten.mul.Tensor(aten.arange.start_step(0, outs[d], dtype=torch.int64,
                                                                           device=self.device), st[d]), p[d])
            end = aten.clamp.default(aten.add.Tensor(start, k[d]), None, sizes[d] + p[d])
            if count_include_pad:
                count = aten.sub.Tensor(end, start)
            else:
                count = aten.sub.Tensor(aten.clamp.default(end, None, sizes[d]), aten.clamp.default(start, 0))
            count = aten.view.default(count, [-1, 1] if d == 0 else [1, -1])
            divisor = count if divisor is None else aten.mul.Tensor(divisor, count)
        return valid, aten.div.Tensor(grad, aten._to_copy.default(divisor, dtype=grad.dtype))

    return _pool_backward(grad_output, self, k, st, p, [1, 1], hit)


def _unfold_windows(x, k, st, p, dl):
    """x [N, C, *S] zero-padded by p, with its convolution windows as a strided view of it:
    [N, C, *OS, *K] (an affine read for coil, no gather)."""
    nd = len(k)
    if any(p):
        x = aten.constant_pad_nd.default(x, [v for d in reversed(range(nd)) for v in (p[d], p[d])], 0.0)
    if not is_non_overlapping_and_dense_or_false(x) or x.storage_offset() != 0:  # (a dense x of any memory order is its storage)
        x = aten.clone.default(x, memory_format=torch.contiguous_format)
    strides = list(x.stride())
    outs = [(x.shape[2 + d] - (k[d] - 1) * dl[d] - 1) // st[d] + 1 for d in range(nd)]
    sizes = list(x.shape[:2]) + outs + list(k)
    view_strides = strides[:2] + [st[d] * strides[2 + d] for d in range(nd)] + [dl[d] * strides[2 + d] for d in range(nd)]
    return aten.as_strided.default(x, sizes, view_strides, x.storage_offset())


def _windows(x, k, st, p, dl):
    """x's convolution windows [N, C, *OS, *K]: for a 1x1 kernel without padding, x itself at every
    st-th position (views of any layout: a channels-last x stays a [N*H*W, C] matrix), else
    _unfold_windows."""
    if any(v != 1 for v in k) or any(p):
        return _unfold_windows(x, k, st, p, dl)
    for d, s in enumerate(st):
        if s > 1:
            x = aten.slice.Tensor(x, 2 + d, 0, None, s)
    for _ in k:
        x = aten.unsqueeze.default(x, -1)
    return x


def _weight_gradient(x, dy, w_shape, stride, padding, dilation, groups):
    """The weight gradient of y = conv(x, w) given dy: the gathered windows of x contracted with
    dy over the batch and output positions, as products (bmm over the groups); a group of one
    input channel (depthwise) as a product-sum."""
    nd = len(w_shape) - 2
    k = list(w_shape[2:])
    cols = _windows(x, k, stride, padding, dilation)  # [N, C, *OS, *K]
    n, c = x.shape[0], x.shape[1]
    o, cg = w_shape[0], w_shape[1]
    os_ = list(dy.shape[2:])
    positions = n
    for v in os_:
        positions *= v
    kk = 1
    for v in k:
        kk *= v
    acc = torch.float32 if x.dtype in (torch.float16, torch.bfloat16) else x.dtype
    if cg == 1:
        # w[o, 0, k] = sum over n, os of dy[n, o, os] * cols[n, o // (O / C), os, k], in f32.
        m = o // c
        cols = aten.view.default(cols, [n, c, 1] + os_ + k)
        if m > 1:
            cols = aten.expand.default(cols, [n, c, m] + os_ + k)
        prod = aten.mul.Tensor(aten._to_copy.default(aten.view.default(dy, [n, c, m] + os_ + [1] * nd), dtype=acc),
                               aten._to_copy.default(cols, dtype=acc))
        grad = aten.sum.dim_IntList(prod, [0] + [3 + d for d in range(nd)])
        return aten._to_copy.default(aten.view.default(grad, list(w_shape)), dtype=x.dtype)
    g = groups
    og = o // g
    # left [g, O/g, N * OS], right [g, N * OS, C/g * K] (splitting the channel dim is a view)
    spatial = list(range(3, 3 + nd))
    left = _flat(aten.permute.default(aten.view.default(dy, [n, g, og] + os_), [1, 2, 0] + spatial), [g, og, positions])
    right = aten.permute.default(aten.view.default(cols, [n, g, cg] + os_ + k), [1, 0] + spatial + [2] + [3 + nd + d for d in range(nd)])
    right = _flat(right, [g, positions, cg * kk])
    grad = aten.bmm.default(left, right) if g > 1 else aten.mm.default(aten.view.default(left, [og, positions]),
                                                                        aten.view.default(right, [positions, cg * kk]))
    return aten.view.default(grad, list(w_shape))


def convolution_backward(grad_output, input, weight, bias_sizes, stride, padding, dilation, transposed, output_padding,
                          groups, output_mask):
    # The input's gradient is the convolution's transpose (a transposed convolution of dy, or
    # for a transposed convolution a forward one); the weight's the windows of the input (of dy
    # for a transposed convolution) contracted with dy (with x); the bias's dy summed.
    nd = weight.dim() - 2
    many = lambda v: list(v) * nd if len(v) == 1 else list(v)  # noqa: E731
    stride, padding, dilation = many(stride), many(padding), many(dilation)
    grad_input = grad_weight = grad_bias = None
    if output_mask[0]:
        if transposed:
            grad_input = aten.convolution.default(grad_output, weight, None, stride, padding, dilation, False, [0] * nd, groups)
        else:
            size = [(grad_output.shape[2 + d] - 1) * stride[d] - 2 * padding[d] + dilation[d] * (weight.shape[2 + d] - 1) + 1
                    for d in range(nd)]
            extra = [input.shape[2 + d] - size[d] for d in range(nd)]
            grad_input = aten.convolution.default(grad_output, weight, None, stride, padding, dilation, True, extra, groups)
    if output_mask[1]:
        if transposed:
            grad_weight = _weight_gradient(grad_output, input, list(weight.shape), stride, padding, dilation, groups)
        else:
            grad_weight = _weight_gradient(input, grad_output, list(weight.shape), stride, padding, dilation, groups)
    if output_mask[2]:
        acc = torch.float32 if grad_output.dtype in (torch.float16, torch.bfloat16) else grad_output.dtype
        grad_bias = aten._to_copy.default(aten.sum.dim_IntList(aten._to_copy.default(grad_output, dtype=acc),
                                                               [0] + list(range(2, grad_output.dim()))), dtype=grad_output.dtype)
    return grad_input, grad_weight, grad_bias
