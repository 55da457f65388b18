"""ATen ops coil calls as PyTorch's library kernels, by design.

Linear algebra (LAPACK, cuSOLVER, MAGMA), FFTs (cuFFT, pocketfft), sorting and selection and a
few more are library routines that no tensor compiler generates: Inductor too runs them as ATen
fallback kernels. coil runs such a node in PyTorch between the parts it compiles, as it runs any
node it does not take, but without a FallbackWarning and also under fallback="error": they are
part of the compiled program, not a gap in it. The adapter logs them (logger "coil", INFO).

Every op here must be one Inductor does not compile (tests/python/test_library.py checks it
against torch._inductor's lowering and decomposition tables): where Inductor generates a kernel
for an op, coil must too, and an unsupported node of it warns.
"""
import operator

import torch

# str(OpOverload) of each op, by the library that does its work.
LIBRARY_OPS = frozenset({
    # Linear algebra: LAPACK on the CPU, cuSOLVER / MAGMA / cuBLAS on CUDA.
    "aten._linalg_check_errors.default", "aten._linalg_det.default", "aten._linalg_eigh.default",
    "aten._linalg_slogdet.default", "aten._linalg_solve_ex.default", "aten._linalg_svd.default",
    "aten.cholesky.default", "aten.cholesky_inverse.default", "aten.cholesky_solve.default", "aten.geqrf.default",
    "aten.linalg_cholesky_ex.default", "aten.linalg_eig.default", "aten.linalg_householder_product.default",
    "aten.linalg_inv_ex.default", "aten.linalg_ldl_factor_ex.default", "aten.linalg_ldl_solve.default",
    "aten.linalg_lu.default", "aten.linalg_lu_factor_ex.default", "aten.linalg_lu_solve.default",
    "aten.linalg_matrix_exp.default", "aten.linalg_pinv.atol_rtol_tensor", "aten.linalg_qr.default",
    "aten.linalg_solve_triangular.default", "aten.lu_unpack.default", "aten.ormqr.default",
    "aten.triangular_solve.default",
    # FFTs: cuFFT on CUDA, pocketfft or MKL on the CPU.
    "aten._fft_r2c.default", "aten._fft_c2c.default", "aten._fft_c2r.default",
    # Sorting and selection: CUB's radix sort and ATen's selection kernels.
    "aten.sort.default", "aten.sort.stable", "aten.topk.default", "aten.kthvalue.default",
    "aten.median.default", "aten.median.dim", "aten.nanmedian.default", "aten.nanmedian.dim", "aten.mode.default",
    # Segmented and binned reductions, distances, bags of embeddings.
    "aten.segment_reduce.default", "aten.histc.default", "aten.histogram.bin_ct", "aten.histogram.bins_tensor",
    "aten._histogramdd_bin_edges.default", "aten._histogramdd_from_bin_cts.default",
    "aten._histogramdd_from_bin_tensors.default",
    "aten._embedding_bag.default", "aten._embedding_bag_forward_only.default",
    "aten._cdist_forward.default", "aten._pdist_forward.default",
    # Special functions with series/continued-fraction kernels of their own in ATen.
    "aten.igamma.default", "aten.igammac.default",
    # Sampling with 3-d grids and antialiased resizing: ATen's gather kernels.
    "aten.grid_sampler_3d.default", "aten._upsample_bilinear2d_aa.default",
    # Fixed-size nonzero and content hashing: ATen's kernels (CUB on CUDA).
    "aten.nonzero_static.default", "aten.hash_tensor.default",
    # Attention whose logsumexp or random state a later node reads (training): the fused kernels.
    "aten._efficient_attention_forward.default", "aten._flash_attention_forward.default",
    "aten._scaled_dot_product_efficient_attention.default", "aten._scaled_dot_product_flash_attention.default",
    "aten._scaled_dot_product_cudnn_attention.default",
    "aten._scaled_dot_product_flash_attention_for_cpu.default",
    # Their gradients in a training graph's backward: the fused kernels' own backward passes.
    "aten._efficient_attention_backward.default", "aten._flash_attention_backward.default",
    "aten._scaled_dot_product_efficient_attention_backward.default",
    "aten._scaled_dot_product_flash_attention_backward.default",
    "aten._scaled_dot_product_cudnn_attention_backward.default",
    "aten._scaled_dot_product_flash_attention_for_cpu_backward.default",
    # Gradients of the library ops above and of others Inductor leaves to ATen's backward kernels:
    # distances, embedding bags, segmented reductions, antialiased resizing, grid sampling,
    # adaptive and 3-d max pools, replication padding, masked_scatter.
    "aten._cdist_backward.default", "aten._pdist_backward.default",
    "aten._embedding_bag_backward.default", "aten._embedding_bag_dense_backward.default",
    "aten._embedding_bag_per_sample_weights_backward.default", "aten._segment_reduce_backward.default",
    "aten._upsample_bilinear2d_aa_backward.default", "aten.grid_sampler_2d_backward.default",
    "aten.grid_sampler_3d_backward.default", "aten._adaptive_avg_pool2d_backward.default",
    "aten._adaptive_avg_pool3d_backward.default", "aten.adaptive_max_pool2d_backward.default",
    "aten.adaptive_max_pool3d_backward.default", "aten.max_pool3d_with_indices_backward.default",
    "aten.replication_pad1d_backward.default", "aten.replication_pad2d_backward.default",
    "aten.masked_scatter_backward.default",
})


def is_library_call(node):
    """Whether this FX node (or the getitem of one) is a call coil leaves to a library kernel."""
    if node.op != "call_function":
        return False
    if node.target is operator.getitem:
        return is_library_call(node.args[0])
    return str(node.target) in LIBRARY_OPS


# ---- library calls as steps of coil's plan (graph op coil.torch_call)

class _Slot:
    """Where the i-th tensor a call takes goes among its arguments."""
    __slots__ = ("i",)

    def __init__(self, i):
        self.i = i


def _fill(value, tensors):
    if type(value) is _Slot:
        return tensors[value.i]
    if isinstance(value, (list, tuple)):
        return type(value)(_fill(v, tensors) for v in value)
    if isinstance(value, dict):
        return {k: _fill(v, tensors) for k, v in value.items()}
    return value


def _used_outputs(node):
    """The indices of the outputs later nodes read (a tuple's getitems), [0] for a single value;
    None where a reader takes the tuple whole."""
    if not isinstance(node.meta.get("val"), (list, tuple)):
        return [0]
    used = set()
    for user in node.users:
        if user.op != "call_function" or user.target is not operator.getitem or not isinstance(user.args[1], int):
            return None
        used.add(user.args[1])
    return sorted(used)


def _static(value, device):
    from ._fx import COIL_DTYPES, STORED_AS

    return (isinstance(value, torch.Tensor) and value.layout == torch.strided and value.device == device
            and (value.dtype in COIL_DTYPES or value.dtype in STORED_AS) and all(type(s) is int for s in list(value.shape) + list(value.stride())))


def hostable(node, device):
    """Whether library call `node` (or a getitem of one) can run as a step of coil's plan: it
    reads tensors of static layout on `device` (besides constants), and the outputs read after it
    are such tensors (no size or seed a later node takes as a number)."""
    if node.op == "call_function" and node.target is operator.getitem:
        return hostable(node.args[0], device)
    if not is_library_call(node):
        return False
    used = _used_outputs(node)
    val = node.meta.get("val")
    outputs = list(val) if isinstance(val, (list, tuple)) else [val]
    if not used or any(not _static(outputs[i], device) for i in used):
        return False
    return bool(node.all_input_nodes) and all(_static(n.meta.get("val"), device) for n in node.all_input_nodes)


def torch_call(node, index, dtype_names):
    """Library call `node` as coil's torch_call node (torch.export's serialized form) and the
    function the plan calls for it: it takes the tensors of the node's inputs (views of coil's
    buffers, valid during the call) and returns per output read (tensor, data pointer), in the
    traced layout (a copy where the kernel gives another, or where it shares an input's memory,
    which coil may reuse once the call is done)."""
    from ._fx import STORED_AS
    from ._runner import LayoutError, restride

    tensor_nodes = []

    def slot(n):
        tensor_nodes.append(n)
        return _Slot(len(tensor_nodes) - 1)

    args, kwargs = torch.fx.node.map_arg((node.args, node.kwargs), slot)
    used = _used_outputs(node)
    val = node.meta.get("val")
    multi = isinstance(val, (list, tuple))
    values = [val[i] if multi else val for i in used]
    layouts = [(tuple(v.shape), tuple(v.stride()), v.dtype) for v in values]
    target = node.target
    # The inputs coil holds as another dtype (STORED_AS), by index, and their own dtypes.
    stored = [(i, n.meta["val"].dtype) for i, n in enumerate(tensor_nodes) if n.meta["val"].dtype in STORED_AS]

    def call(tensors):
        for i, dtype in stored:
            tensors[i] = tensors[i].view(dtype)
        result = target(*_fill(args, tensors), **_fill(kwargs, tensors))
        outputs = [result[i] for i in used] if multi else [result]
        storages = {t.untyped_storage().data_ptr() for t in tensors}
        handed = []
        for out, (sizes, strides, dtype) in zip(outputs, layouts):
            if out.dtype != dtype or tuple(out.shape) != sizes:
                raise LayoutError(f"{target} returned {out.dtype}{list(out.shape)} where PyTorch traced {dtype}{list(sizes)}")
            if (out.numel() and out.stride() != strides) or out.untyped_storage().data_ptr() in storages:
                out = restride(out, sizes, strides)
                if out is None:
                    raise LayoutError(f"{target}: an output layout coil cannot copy into")
            if dtype in STORED_AS:
                out = out.view(STORED_AS[dtype])
            handed.append((out, out.data_ptr()))
        return handed

    from ._fx import value_name
    spec = ";".join(f"{dtype_names[STORED_AS.get(dtype, dtype)]}:{','.join(map(str, sizes))}:{','.join(map(str, strides))}"
                    for sizes, strides, dtype in layouts)
    names = [f"{node.name}__{i}" if multi else node.name for i in used]
    program_node = {"target": "torch.ops.coil.torch_call.default", "name": node.name,
                    "inputs": [{"name": "inputs", "arg": {"as_tensors": [{"name": value_name(n)} for n in tensor_nodes]}},
                               {"name": "index", "arg": {"as_int": index}},
                               {"name": "outputs", "arg": {"as_string": spec}}],
                    "outputs": [{"as_tensor": {"name": name}} for name in names]}
    return program_node, call
