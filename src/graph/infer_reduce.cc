// Inference for reductions, normalizations and linear algebra.
#include <algorithm>

#include "graph/infer_ops.h"
#include "graph/pooling.h"
#include "support/check.h"
#include "support/checked.h"

namespace coil {

namespace {

// The dims a reduction reduces: all of them for None or [], else the wrapped list.
std::vector<int64_t> reduce_dims(const std::optional<std::vector<int64_t>>& dims, int64_t rank, const std::string& op) {
  std::vector<int64_t> out;
  if (!dims || dims->empty()) {
    for (int64_t d = 0; d < rank; ++d) out.push_back(d);
    return out;
  }
  for (int64_t d : *dims) {
    int64_t w = wrap_dim(d, rank, op);
    if (std::find(out.begin(), out.end(), w) != out.end()) fail("{}: dim {} appears multiple times in the list of dims", op, w);
    out.push_back(w);
  }
  return out;
}

SymShape reduced_shape(const SymShape& in, const std::vector<int64_t>& dims, bool keepdim) {
  SymShape out;
  for (size_t d = 0; d < in.size(); ++d) {
    bool reduced = std::find(dims.begin(), dims.end(), static_cast<int64_t>(d)) != dims.end();
    if (!reduced) out.push_back(in[d]);
    else if (keepdim) out.push_back(1);
  }
  return out;
}

// Max-like reductions have no identity, so an empty reduced dim is an error.
void require_nonempty(const TensorMeta& self, const std::vector<int64_t>& dims, const std::string& op) {
  if (self.dim() == 0) return;
  for (int64_t d : dims)
    if (self.sizes[static_cast<size_t>(d)] == SymInt(0))
      fail("{}: expected reduction dim {} to have non-zero size", op, d);
}

DType accumulate_dtype(DType in, std::optional<DType> requested) {
  if (requested) return *requested;
  return is_integral(in, true) ? DType::i64 : in;
}

std::vector<TensorMeta> reductions(const ArgReader& a) {
  const std::string& op = a.op_name();
  const TensorMeta& self = a.tensor("self");
  int64_t rank = self.dim();
  auto out = [&](DType dt, const std::vector<int64_t>& dims, bool keepdim) {
    return TensorMeta::contiguous(dt, reduced_shape(self.sizes, dims, keepdim), self.device);
  };
  auto all_dims = reduce_dims(std::nullopt, rank, op);
  switch (a.node().op) {
    case OpKind::Sum: return {out(accumulate_dtype(self.dtype, a.opt_dtype("dtype")), all_dims, false)};
    case OpKind::Prod: return {out(accumulate_dtype(self.dtype, a.opt_dtype("dtype")), all_dims, false)};
    case OpKind::SumDimIntList:
      return {out(accumulate_dtype(self.dtype, a.opt_dtype("dtype")), reduce_dims(a.opt_ints("dim"), rank, op), a.flag("keepdim"))};
    case OpKind::ProdDimInt:
      return {out(accumulate_dtype(self.dtype, a.opt_dtype("dtype")), reduce_dims(std::vector<int64_t>{a.integer("dim")}, rank, op), a.flag("keepdim"))};
    case OpKind::Mean:
    case OpKind::MeanDim: {
      DType dt = a.opt_dtype("dtype").value_or(self.dtype);
      if (!is_float(dt))
        fail("{}: could not infer output dtype. the input dtype must be floating point, got {}; pass dtype= to choose one", op, dtype_name(dt));
      auto dims = a.node().op == OpKind::Mean ? all_dims : reduce_dims(a.opt_ints("dim"), rank, op);
      return {out(dt, dims, a.node().op == OpKind::MeanDim && a.flag("keepdim"))};
    }
    case OpKind::Max:
    case OpKind::Min:
      if (self.dim() > 0 && product(self.sizes) == SymInt(0))
        fail("{}: expected reduction dim to be specified for input.numel() == 0; specify the reduction dim with the "
             "'dim' argument", op);
      return {out(self.dtype, all_dims, false)};
    case OpKind::Amax:
    case OpKind::Amin: {
      auto dims = reduce_dims(a.ints("dim"), rank, op);
      require_nonempty(self, dims, op);
      return {out(self.dtype, dims, a.flag("keepdim"))};
    }
    case OpKind::Argmax:
    case OpKind::Argmin: {
      if (self.dtype == DType::b8) fail("{}: does not support bool input", op);
      auto dim = a.opt_sym("dim");
      if (!dim) {
        if (self.sizes.size() && product(self.sizes) == SymInt(0))
          fail("{}: expected reduction dim to be specified for input.numel() == 0", op);
        return {out(DType::i64, all_dims, a.flag("keepdim"))};
      }
      std::vector<int64_t> dims = {wrap_dim(a.integer("dim"), rank, op)};
      require_nonempty(self, dims, op);
      return {out(DType::i64, dims, a.flag("keepdim"))};
    }
    case OpKind::VarCorrection: {
      if (!is_float(self.dtype)) fail("{}: std and var only support floating point dtypes, got {}", op, dtype_name(self.dtype));
      return {out(self.dtype, reduce_dims(a.opt_ints("dim"), rank, op), a.flag("keepdim"))};
    }
    case OpKind::Any:
    case OpKind::AnyDim:
    case OpKind::AnyDims: {
      DType dt = self.dtype == DType::u8 ? DType::u8 : DType::b8;
      if (a.node().op == OpKind::Any) return {out(dt, all_dims, false)};
      std::optional<std::vector<int64_t>> dims;
      if (a.node().op == OpKind::AnyDim) dims = std::vector<int64_t>{a.integer("dim")};
      else dims = a.opt_ints("dim");
      // Unlike sum's, an empty dim list of any.dims reduces nothing.
      if (dims && dims->empty()) return {out(dt, {}, false)};
      return {out(dt, reduce_dims(dims, rank, op), a.flag("keepdim"))};
    }
    case OpKind::MaxDim:
    case OpKind::MinDim: {
      std::vector<int64_t> dims = {wrap_dim(a.integer("dim"), rank, op)};
      require_nonempty(self, dims, op);
      bool keep = a.flag("keepdim");
      return {out(self.dtype, dims, keep), out(DType::i64, dims, keep)};
    }
    case OpKind::Cumsum:
    case OpKind::Cumprod:
      wrap_dim(a.integer("dim"), rank, op);
      return {TensorMeta::contiguous(accumulate_dtype(self.dtype, a.opt_dtype("dtype")), self.sizes, self.device)};
    case OpKind::Cummax:
    case OpKind::Cummin:
      wrap_dim(a.integer("dim"), rank, op);
      return {TensorMeta::contiguous(self.dtype, self.sizes, self.device), TensorMeta::contiguous(DType::i64, self.sizes, self.device)};
    case OpKind::Logcumsumexp:
      wrap_dim(a.integer("dim"), rank, op);
      if (!is_float(self.dtype)) fail("{}: not implemented for '{}' (floating-point tensors only)", op, dtype_name(self.dtype));
      return {TensorMeta::contiguous(self.dtype, self.sizes, self.device)};
    default: break;
  }
  COIL_CHECK(false) << "no reduction rule for " << op;
}

void require_float(const TensorMeta& m, const std::string& op, std::string_view what) {
  if (!is_float(m.dtype)) fail("{}: {} must be a floating-point tensor, got {}", op, what, dtype_name(m.dtype));
}

void require_shape(const std::optional<TensorMeta>& m, const SymShape& want, const std::string& op, std::string_view what) {
  if (m && m->sizes != want)
    fail("{}: expected {} of shape {}, got {}", op, what, shape_str(want), shape_str(m->sizes));
}

// The parameters (weight, bias, running statistics) of a normalization have the input's dtype
// or, for an f16/bf16 input, are all f32 ("mixed"): the statistics are then f32 too. Returns
// whether they are mixed.
bool mixed_params(const TensorMeta& input, const std::vector<std::optional<TensorMeta>>& params, const std::string& op) {
  bool reduced = input.dtype == DType::f16 || input.dtype == DType::bf16;
  bool mixed = reduced && std::any_of(params.begin(), params.end(), [](const auto& p) { return p && p->dtype == DType::f32; });
  for (const auto& p : params)
    if (p && p->dtype != (mixed ? DType::f32 : input.dtype))
      fail("{}: parameters must have the input's dtype {} (or all be f32 for an f16/bf16 input), got {}", op,
           dtype_name(input.dtype), dtype_name(p->dtype));
  return mixed;
}

std::vector<TensorMeta> normalizations(const ArgReader& a) {
  const std::string& op = a.op_name();
  switch (a.node().op) {
    case OpKind::Softmax:
    case OpKind::LogSoftmax: {
      const TensorMeta& self = a.tensor("self");
      require_float(self, op, "input");
      wrap_dim(a.integer("dim"), self.dim(), op);
      DType dt = self.dtype;
      if (a.flag("half_to_float")) {
        if (self.dtype != DType::f16 && self.dtype != DType::bf16)
          fail("{}: half_to_float is only supported for f16 and bf16 inputs, got {}", op, dtype_name(self.dtype));
        dt = DType::f32;
      }
      return {TensorMeta::contiguous(dt, self.sizes, self.device)};
    }
    case OpKind::NativeLayerNorm: {
      const TensorMeta& input = a.tensor("input");
      require_float(input, op, "input");
      IntList ns = a.syms("normalized_shape");
      if (ns.empty() || static_cast<int64_t>(ns.size()) > input.dim() ||
          !std::equal(ns.begin(), ns.end(), input.sizes.end() - static_cast<std::ptrdiff_t>(ns.size())))
        fail("{}: given normalized_shape={}, expected input with shape [*, {}], but got input of size {}", op,
             shape_str(ns), shape_str(ns).substr(1, shape_str(ns).size() - 2), shape_str(input.sizes));
      require_shape(a.opt_tensor("weight"), ns, op, "weight");
      require_shape(a.opt_tensor("bias"), ns, op, "bias");
      SymShape stat(input.sizes.begin(), input.sizes.end() - static_cast<std::ptrdiff_t>(ns.size()));
      stat.resize(input.sizes.size(), 1);
      // Statistics are kept in the accumulation type on CUDA, in the input type on the CPU.
      bool mixed = mixed_params(input, {a.opt_tensor("weight"), a.opt_tensor("bias")}, op);
      DType stat_dtype = mixed || (input.device.kind == Device::Kind::cuda && dtype_size(input.dtype) == 2) ? DType::f32 : input.dtype;
      return {TensorMeta::contiguous(input.dtype, input.sizes, input.device),
              TensorMeta::contiguous(stat_dtype, stat, input.device),
              TensorMeta::contiguous(stat_dtype, stat, input.device)};
    }
    case OpKind::NativeGroupNorm: {
      const TensorMeta& input = a.tensor("input");
      require_float(input, op, "input");
      SymInt n = a.sym("N"), c = a.sym("C"), hw = a.sym("HxW");
      int64_t group = a.integer("group");
      if (input.dim() < 2) fail("{}: expected input with at least 2 dims, got {}", op, input.dim());
      SymInt spatial = 1;
      for (size_t i = 2; i < input.sizes.size(); ++i) spatial = spatial * input.sizes[i];
      if (input.sizes[0] != n || input.sizes[1] != c || spatial != hw)
        fail("{}: N={}, C={}, HxW={} do not match input of shape {}", op, n.str(), c.str(), hw.str(), shape_str(input.sizes));
      if (group <= 0 || (c.is_constant() && *c.constant() % group != 0))
        fail("{}: expected number of channels in input to be divisible by num_groups, but got input of shape {} and num_groups={}", op, shape_str(input.sizes), group);
      require_shape(a.opt_tensor("weight"), {c}, op, "weight");
      require_shape(a.opt_tensor("bias"), {c}, op, "bias");
      SymShape stat = {n, group};
      DType stat_dtype = mixed_params(input, {a.opt_tensor("weight"), a.opt_tensor("bias")}, op) ? DType::f32 : input.dtype;
      return {TensorMeta::contiguous(input.dtype, input.sizes, input.device),
              TensorMeta::contiguous(stat_dtype, stat, input.device),
              TensorMeta::contiguous(stat_dtype, stat, input.device)};
    }
    case OpKind::BatchNormNoTraining: {
      const TensorMeta& input = a.tensor("input");
      require_float(input, op, "input");
      if (input.dim() < 2) fail("{}: expected input with at least 2 dims, got {}", op, input.dim());
      SymShape c = {input.sizes[1]};
      require_shape(a.opt_tensor("weight"), c, op, "weight");
      require_shape(a.opt_tensor("bias"), c, op, "bias");
      require_shape(a.tensor("running_mean"), c, op, "running_mean");
      require_shape(a.tensor("running_var"), c, op, "running_var");
      bool mixed = mixed_params(input, {a.opt_tensor("weight"), a.opt_tensor("bias"), a.tensor("running_mean"), a.tensor("running_var")}, op);
      // PyTorch's CPU kernel saves nothing in inference; its CUDA kernel saves the running mean
      // and the inverse standard deviation, per channel, in the computation dtype.
      bool cpu = input.device.kind == Device::Kind::cpu;
      DType stat_dtype = !cpu && (input.dtype == DType::f16 || input.dtype == DType::bf16) ? DType::f32
                         : mixed                                                       ? DType::f32
                                                                                       : input.dtype;
      SymShape saved = cpu ? SymShape{0} : c;
      return {TensorMeta::contiguous(input.dtype, input.sizes, input.device),
              TensorMeta::contiguous(stat_dtype, saved, input.device),
              TensorMeta::contiguous(stat_dtype, saved, input.device)};
    }
    case OpKind::BatchNormFunctional:
    case OpKind::BatchNormNoStats: {
      // As PyTorch's meta (its decomposition, native_batch_norm_helper) says, which AOTAutograd's
      // graphs follow: the saved mean and invstd have the input's dtype on the CPU and the
      // computation dtype elsewhere; the new running statistics are computed in the computation
      // dtype (f32 for f16/bf16), promoted with the old ones' dtype in training. (PyTorch's CPU
      // kernel returns 16-bit running statistics; the traced graph casts them back itself.)
      bool functional = a.node().op == OpKind::BatchNormFunctional;
      const TensorMeta& input = a.tensor("input");
      require_float(input, op, "input");
      if (input.dim() < 2) fail("{}: expected input with at least 2 dims, got {}", op, input.dim());
      SymShape c = {input.sizes[1]};
      std::vector<std::optional<TensorMeta>> params = {a.opt_tensor("weight"), a.opt_tensor("bias")};
      require_shape(params[0], c, op, "weight");
      require_shape(params[1], c, op, "bias");
      if (functional) {
        params.push_back(a.tensor("running_mean"));
        params.push_back(a.tensor("running_var"));
        require_shape(params[2], c, op, "running_mean");
        require_shape(params[3], c, op, "running_var");
      }
      mixed_params(input, params, op);
      bool training = a.flag("training");
      if (training && product(input.sizes) == SymInt(0))
        fail("{}: input tensor must have at least one element, but got input_sizes = {}", op, shape_str(input.sizes));
      if (!functional && !training) fail("{}: running_mean and running_var must be given in eval mode", op);
      DType compute = input.dtype == DType::f16 || input.dtype == DType::bf16 ? DType::f32 : input.dtype;
      bool cpu = input.device.kind == Device::Kind::cpu;
      DType saved = cpu ? input.dtype : compute;
      SymShape saved_shape = training || !cpu ? c : SymShape{0};
      std::vector<TensorMeta> out = {TensorMeta::contiguous(input.dtype, input.sizes, input.device),
                                     TensorMeta::contiguous(saved, saved_shape, input.device),
                                     TensorMeta::contiguous(saved, saved_shape, input.device)};
      if (!functional) return out;
      for (size_t i = 2; i < 4; ++i)
        out.push_back(TensorMeta::contiguous(training ? promote_types(compute, params[i]->dtype) : compute, c, input.device));
      return out;
    }
    default: break;
  }
  COIL_CHECK(false) << "no normalization rule for " << op;
}

void require_same_dtype(const TensorMeta& x, const TensorMeta& y, const std::string& op) {
  if (x.dtype != y.dtype)
    fail("{}: expected both operands to have the same dtype, but got {} != {}", op, dtype_name(x.dtype), dtype_name(y.dtype));
}

void require_rank(const TensorMeta& m, int64_t rank, const std::string& op, std::string_view what) {
  if (m.dim() != rank) fail("{}: {} must be a {}-D tensor, got {} dims", op, what, rank, m.dim());
}

std::vector<TensorMeta> linalg(const ArgReader& a) {
  const std::string& op = a.op_name();
  switch (a.node().op) {
    case OpKind::Mm:
    case OpKind::Bmm: {
      const TensorMeta& x = a.tensor("self");
      const TensorMeta& y = a.tensor("mat2");
      int64_t rank = a.node().op == OpKind::Mm ? 2 : 3;
      require_rank(x, rank, op, "self");
      require_rank(y, rank, op, "mat2");
      require_same_dtype(x, y, op);
      if (x.dtype == DType::b8) fail("{}: not implemented for bool", op);
      size_t k = static_cast<size_t>(rank) - 1;
      if (x.sizes[k] != y.sizes[k - 1])
        fail("{}: mat1 and mat2 shapes cannot be multiplied ({} and {})", op, shape_str(x.sizes), shape_str(y.sizes));
      if (rank == 3 && x.sizes[0] != y.sizes[0])
        fail("{}: batch sizes differ ({} and {})", op, x.sizes[0].str(), y.sizes[0].str());
      SymShape sizes = x.sizes;
      sizes[k] = y.sizes[k];
      return {TensorMeta::contiguous(x.dtype, sizes, x.device)};
    }
    case OpKind::Addmm: {
      const TensorMeta& bias = a.tensor("self");
      const TensorMeta& x = a.tensor("mat1");
      const TensorMeta& y = a.tensor("mat2");
      require_rank(x, 2, op, "mat1");
      require_rank(y, 2, op, "mat2");
      require_same_dtype(x, y, op);
      require_same_dtype(bias, x, op);
      if (x.dtype == DType::b8) fail("{}: not implemented for bool", op);
      if (x.sizes[1] != y.sizes[0])
        fail("{}: mat1 and mat2 shapes cannot be multiplied ({} and {})", op, shape_str(x.sizes), shape_str(y.sizes));
      SymShape sizes = {x.sizes[0], y.sizes[1]};
      if (broadcast_shapes(bias.sizes, sizes, op) != sizes)
        fail("{}: self of shape {} cannot be broadcast to {}", op, shape_str(bias.sizes), shape_str(sizes));
      return {TensorMeta::contiguous(x.dtype, sizes, x.device)};
    }
    case OpKind::Convolution: {
      const TensorMeta& input = a.tensor("input");
      const TensorMeta& weight = a.tensor("weight");
      bool transposed = a.flag("transposed");
      int64_t k = weight.dim() - 2;
      if (k < 1 || k > 3) fail("{}: weight must be 3-D, 4-D or 5-D, got {} dims", op, weight.dim());
      require_rank(input, k + 2, op, "input (batched)");
      require_same_dtype(input, weight, op);
      // ATen's CPU kernels: no bool; transposed convolutions only for floats and i64.
      if (input.dtype == DType::b8 || (transposed && !is_float(input.dtype) && input.dtype != DType::i64))
        fail("{}: {}convolution is not implemented for {}", op, transposed ? "transposed " : "", dtype_name(input.dtype));
      if (auto bias = a.opt_tensor("bias"); bias && bias->dtype != input.dtype)
        fail("{}: input type {} and bias type {} should be the same", op, dtype_name(input.dtype), dtype_name(bias->dtype));
      auto expand = [&](std::string_view name) {
        auto v = a.ints(name);
        if (v.size() == 1) v.resize(static_cast<size_t>(k), v[0]);
        if (static_cast<int64_t>(v.size()) != k) fail("{}: expected {} to have {} elements, got {}", op, name, k, v.size());
        return v;
      };
      auto stride = expand("stride"), padding = expand("padding"), dilation = expand("dilation");
      auto output_padding = expand("output_padding");
      for (size_t i = 0; i < stride.size(); ++i) {
        if (stride[i] <= 0) fail("{}: non-positive stride is not supported", op);
        if (dilation[i] <= 0) fail("{}: dilation should be greater than zero", op);
        if (padding[i] < 0) fail("{}: negative padding is not supported", op);
        if (output_padding[i] < 0) fail("{}: negative output_padding is not supported", op);
        if (transposed && output_padding[i] >= stride[i] && output_padding[i] >= dilation[i])
          fail("{}: output padding must be smaller than either stride or dilation, got output_padding={}", op,
               output_padding[i]);
      }
      int64_t groups = a.integer("groups");
      if (groups <= 0) fail("{}: non-positive groups is not supported", op);
      // A convolution's weight is [C_out, C_in / groups, k...]; a transposed one's [C_in, C_out / groups, k...].
      SymInt cin = transposed ? weight.sizes[0] : weight.sizes[1] * groups;
      SymInt cout = transposed ? weight.sizes[1] * groups : weight.sizes[0];
      if (input.sizes[1] != cin)
        fail("{}: given groups={}, weight of size {}, expected input {} to have {} channels, but got {} channels instead", op, groups, shape_str(weight.sizes), shape_str(input.sizes), cin.str(), input.sizes[1].str());
      if (weight.sizes[0].is_constant() && *weight.sizes[0].constant() % groups != 0)
        fail("{}: {} ({}) must be divisible by groups ({})", op, transposed ? "in_channels" : "out_channels",
             weight.sizes[0].str(), groups);
      require_shape(a.opt_tensor("bias"), {cout}, op, "bias");
      SymShape sizes = {input.sizes[0], cout};
      for (size_t i = 0; i < static_cast<size_t>(k); ++i) {
        SymInt span = (weight.sizes[i + 2] - 1) * dilation[i];
        const int64_t both_sides = checked_mul(2, padding[i], "a convolution's padding");
        SymInt o = transposed ? (input.sizes[i + 2] - 1) * stride[i] - both_sides + span + output_padding[i] + 1
                              : floordiv(input.sizes[i + 2] + both_sides - span - 1, stride[i]) + 1;
        if (o.is_constant() && *o.constant() <= 0)
          fail("{}: calculated output size {} is too small for input {} and kernel {}", op, o.str(), shape_str(input.sizes), shape_str(weight.sizes));
        sizes.push_back(o);
      }
      return {TensorMeta::contiguous(input.dtype, sizes, input.device)};
    }
    case OpKind::MaxPool2dWithIndices:
    case OpKind::AvgPool2d:
    case OpKind::AdaptiveAvgPool2d: {
      const TensorMeta& x = a.tensor("self");
      bool max = a.node().op == OpKind::MaxPool2dWithIndices;
      // Average pooling takes int64 (not other integers) as ATen's CPU kernel does; adaptive, floats only.
      bool avg_int64 = a.node().op == OpKind::AvgPool2d && x.dtype == DType::i64;
      if (x.dtype == DType::b8 || (!max && !is_float(x.dtype) && !avg_int64)) fail("{}: not implemented for {}", op, dtype_name(x.dtype));
      std::array<SymInt, 2> out{SymInt(0), SymInt(0)};
      if (a.node().op == OpKind::AdaptiveAvgPool2d) {
        auto size = a.ints("output_size");
        adaptive_input_size(op, x, size);  // checks there are two
        out = {SymInt(size[0]), SymInt(size[1])};
      } else {
        out = pool2d_of(a, max, op, x).out;
        if (!max && !a.is_none("divisor_override") && a.integer("divisor_override") == 0) fail("{}: divisor must be not zero", op);
      }
      SymShape sizes(x.sizes.begin(), x.sizes.end() - 2);
      sizes.push_back(out[0]);
      sizes.push_back(out[1]);
      TensorMeta values = TensorMeta::contiguous(x.dtype, sizes, x.device);
      if (!max) return {values};
      return {values, TensorMeta::contiguous(DType::i64, sizes, x.device)};
    }
    case OpKind::ScaledDotProductAttention: {
      const TensorMeta& q = a.tensor("query");
      const TensorMeta& k = a.tensor("key");
      const TensorMeta& v = a.tensor("value");
      require_float(q, op, "query");
      require_same_dtype(q, k, op);
      require_same_dtype(q, v, op);
      if (q.dim() < 2 || k.dim() != q.dim() || v.dim() != q.dim())
        fail("{}: query, key and value must have the same rank >= 2, got {}, {}, {}", op, q.dim(), k.dim(), v.dim());
      size_t r = static_cast<size_t>(q.dim());
      if (q.sizes[r - 1] != k.sizes[r - 1])
        fail("{}: query and key embedding sizes differ ({} vs {})", op, q.sizes[r - 1].str(), k.sizes[r - 1].str());
      if (k.sizes[r - 2] != v.sizes[r - 2])
        fail("{}: key and value sequence lengths differ ({} vs {})", op, k.sizes[r - 2].str(), v.sizes[r - 2].str());
      bool gqa = a.flag("enable_gqa");
      for (size_t i = 0; i + 2 < r; ++i) {
        bool heads = gqa && i + 3 == r;
        if (heads) {
          if (!(q.sizes[i].is_constant() && k.sizes[i].is_constant() && v.sizes[i].is_constant() &&
                *q.sizes[i].constant() % *k.sizes[i].constant() == 0 && k.sizes[i] == v.sizes[i]))
            fail("{}: with enable_gqa, query heads ({}) must be a multiple of key/value heads ({})", op, q.sizes[i].str(), k.sizes[i].str());
        } else if (q.sizes[i] != k.sizes[i] || q.sizes[i] != v.sizes[i]) {
          fail("{}: batch dimensions of query, key and value must match ({}, {}, {})", op, shape_str(q.sizes), shape_str(k.sizes), shape_str(v.sizes));
        }
      }
      if (a.real("dropout_p") != 0.0) fail("{}: dropout_p must be 0 (coil compiles inference graphs)", op);
      if (auto mask = a.opt_tensor("attn_mask")) {
        if (a.flag("is_causal")) fail("{}: explicit attn_mask should not be set when is_causal=True", op);
        if (mask->dtype != DType::b8 && mask->dtype != q.dtype)
          fail("{}: attn_mask must be bool or match the query dtype {}, got {}", op, dtype_name(q.dtype), dtype_name(mask->dtype));
        SymShape scores = q.sizes;
        scores[r - 1] = k.sizes[r - 2];
        if (broadcast_shapes(mask->sizes, scores, op) != scores)
          fail("{}: attn_mask of shape {} cannot be broadcast to the attention scores {}", op, shape_str(mask->sizes), shape_str(scores));
      }
      SymShape sizes = q.sizes;
      sizes[r - 1] = v.sizes[r - 1];
      return {TensorMeta::contiguous(q.dtype, sizes, q.device)};
    }
    case OpKind::TorchCall: return infer_torch_call(a);
    default: break;
  }
  COIL_CHECK(false) << "no linalg rule for " << op;
}

}  // namespace

std::vector<TensorMeta> infer_reduction(const ArgReader& args) { return reductions(args); }
std::vector<TensorMeta> infer_normalization(const ArgReader& args) { return normalizations(args); }
std::vector<TensorMeta> infer_linalg(const ArgReader& args) { return linalg(args); }

}  // namespace coil
