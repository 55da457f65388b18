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
import threading

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

# The graph op's schema in coil's namespace (as ops.def declares it); only coil's plan runs it.
_LIBRARY = torch.library.Library("coil", "FRAGMENT")  # noqa: TOR901 - coil's own namespace
_LIBRARY.define("torch_call(Tensor[] inputs, int index, str outputs) -> Tensor[]")

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


def _filler(template):
    """A function of the call's tensors giving `template` (args or kwargs) with its slots
    filled: a comprehension where no slot is nested, else _fill."""
    if isinstance(template, dict):
        if any(isinstance(v, (list, tuple, dict)) for v in template.values()):
            return lambda given: _fill(template, given)
        return lambda given: {k: given[v.i] if type(v) is _Slot else v for k, v in template.items()}
    if any(isinstance(v, (list, tuple, dict)) for v in template):
        return lambda given: _fill(template, given)
    return lambda given: [given[v.i] if type(v) is _Slot else v for v in template]


def static(value, device):
    """Whether coil can hold this traced value in its buffers: a tensor of static layout, of a
    dtype coil has, on the graph's device."""
    from ._fx import COIL_DTYPES

    return (isinstance(value, torch.Tensor) and value.layout == torch.strided and value.device == device
            and value.dtype in COIL_DTYPES and all(type(s) is int for s in list(value.shape) + list(value.stride())))


def passed_around(node):
    """Whether value `node` (a placeholder, or a library call's result) may go around coil's
    buffers: only library calls and the graph's output read it (Stash)."""
    return all(u.op == "output" or (u.op == "call_function" and is_library_call(u)) for u in node.users)


def _values(node):
    """The library call's results that later nodes read: [(index, node that names it)] (a
    tuple's getitems; the node itself for a single value); None where a reader takes the tuple
    whole."""
    if not isinstance(node.meta.get("val"), (list, tuple)):
        return [(0, node)]
    if any(u.op != "call_function" or u.target is not operator.getitem or not isinstance(u.args[1], int) for u in node.users):
        return None
    return sorted(((u.args[1], u) for u in node.users), key=lambda pair: pair[0])


def hostable(node, device):
    """Whether library call `node` (or a getitem of one) can run as a step of coil's plan: each
    value it reads and each result read after it is one coil holds (`static`) or one only library
    calls and the output read (passed around coil, Stash), and coil holds at least one result."""
    if node.op == "call_function" and node.target is operator.getitem:
        return hostable(node.args[0], device)
    values = _values(node) if is_library_call(node) else None
    if values is None:
        return False
    held = [static(v.meta.get("val"), device) for _, v in values]
    if not any(held) or not all(h or passed_around(v) for h, (_, v) in zip(held, values)):
        return False
    for n in node.all_input_nodes:
        around = n.op == "placeholder" or (n.op == "call_function" and is_library_call(n))
        if not static(n.meta.get("val"), device) and not (around and passed_around(n)):
            return False
    return True


def split_reason(gm, library, device, takes_input):
    """Why graph `gm`, whose only nodes coil does not generate are the library calls `library`,
    cannot compile whole with them as plan steps, or None where it can (`takes_input`: whether
    coil takes a placeholder as an input)."""
    refused = [f"{n.name} ({n.target})" for n in library if not hostable(n, device)]
    if refused:
        return ", ".join(refused)
    if not all(takes_input(n) or passed_around(n) for n in gm.graph.nodes if n.op == "placeholder"):
        return "an input coil cannot hold"
    return None


class Stash(threading.local):
    """What a program's library calls hand one another around coil's buffers in a run: the run's
    arguments (for placeholders only library calls read: a backward's random state) and the
    results no compiled node reads (the forward's random state, sizes, tensors on another
    device), by value name. The runner fills `args` before a run and empties both after it."""

    def __init__(self):
        self.args, self.values = None, {}


def torch_call(node, index, dtype_names, device, stash, around):
    """Library call `node` as coil's torch_call node (torch.export's serialized form) and the
    function the plan calls for it. `around` maps the values passed around coil's buffers to
    where they are found: ("arg", position) in the run's arguments, or ("stash", name).

    The function takes the tensors coil holds among the node's inputs (views of coil's buffers,
    valid during the call), puts the results no compiled node reads in `stash`, and returns per
    other result (tensor, data pointer), in the traced layout (a copy where the kernel gives
    another, or where it shares an input's memory, which coil may reuse once the call is done)."""
    from ._fx import value_name
    from ._runner import LayoutError, restride

    coil_inputs, sources = [], []  # per tensor argument: ("coil", i), ("arg", position) or ("stash", name)

    def slot(n):
        where = around.get(n)
        if where is None:
            where = ("coil", len(coil_inputs))
            coil_inputs.append(n)
        sources.append(where)
        return _Slot(len(sources) - 1)

    args, kwargs = torch.fx.node.map_arg((node.args, node.kwargs), slot)
    val = node.meta.get("val")
    multi = isinstance(val, (list, tuple))
    kept, stashed = [], []  # (index, traced value, its name), coil's results and the stash's
    for i, reader in _values(node):
        (kept if static(reader.meta.get("val"), device) else stashed).append((i, val[i] if multi else val, value_name(reader)))
    layouts = [(tuple(v.shape), tuple(v.stride()), v.dtype) for _, v, _ in kept]
    target = node.target

    # (the plan calls this per step of a run: attention twice a layer in training)
    direct = all(w == ("coil", i) for i, w in enumerate(sources))  # the inputs are coil's, in order
    fill_args, fill_kwargs = _filler(args), _filler(kwargs)
    # An op whose schema lets a result alias an input may hand back coil's memory; others may not.
    may_alias = any(r.alias_info is not None for r in target._schema.returns)

    def call(tensors):
        given = tensors if direct else [
            tensors[w[1]] if w[0] == "coil" else stash.args[w[1]] if w[0] == "arg" else stash.values[w[1]] for w in sources]
        result = target(*fill_args(given), **fill_kwargs(given))
        for i, _, name in stashed:
            stash.values[name] = result[i] if multi else result
        outputs = [result[i] for i, _, _ in kept] if multi else [result]
        storages = {t.untyped_storage().data_ptr() for t in tensors} if may_alias else ()
        handed = []
        for out, (sizes, strides, dtype) in zip(outputs, layouts):
            if out.dtype != dtype or out.shape != sizes:
                raise LayoutError(f"{target} returned {out.dtype}{list(out.shape)} where PyTorch traced {dtype}{list(sizes)}")
            if (out.stride() != strides and out.numel()) or (may_alias and out.untyped_storage().data_ptr() in storages):
                out = restride(out, sizes, strides)
                if out is None:
                    raise LayoutError(f"{target}: an output layout coil cannot copy into")
            handed.append((out, out.data_ptr()))
        return handed

    spec = ";".join(f"{dtype_names[dtype]}:{','.join(map(str, sizes))}:{','.join(map(str, strides))}"
                    for sizes, strides, dtype in layouts)
    names = [name for _, _, name in kept]
    for _, _, name in stashed:
        around[next(u for u in (node.users if multi else [node]) if value_name(u) == name)] = ("stash", name)
    program_node = {"target": "torch.ops.coil.torch_call.default", "name": node.name,
                    "inputs": [{"name": "inputs", "arg": {"as_tensors": [{"name": value_name(n)} for n in coil_inputs]}},
                               {"name": "index", "arg": {"as_int": index}},
                               {"name": "outputs", "arg": {"as_string": spec}}],
                    "outputs": [{"as_tensor": {"name": name}} for name in names]}
    return program_node, call
