#include "frontend/export_decompose.h"

#include <algorithm>
#include <limits>
#include <set>

#include "support/check.h"

namespace coil::frontend {

namespace {

// The arguments of one node: by name, with the defaults torch.export omits.
struct Args {
  const std::map<std::string, Arg>& map;
  const std::string& op;

  const Arg& at(const char* key) const {
    auto it = map.find(key);
    if (it == map.end()) fail("{} is missing its argument '{}'", op, key);
    return it->second;
  }
  Arg get(const char* key, Arg fallback = std::nullopt) const {
    auto it = map.find(key);
    return it == map.end() ? fallback : it->second;
  }
  ValueRef tensor(const char* key) const {
    const auto* v = std::get_if<ValueRef>(&at(key).value);
    if (!v) fail("{}: argument '{}' is not a tensor", op, key);
    return *v;
  }
  int64_t integer(const char* key, int64_t fallback) const {
    Arg a = get(key, fallback);
    const auto* s = std::get_if<SymInt>(&a.value);
    if (!s || !s->constant()) fail("{}: argument '{}' is not a constant integer", op, key);
    return *s->constant();
  }
  // An int list, or one int standing for `n` of them.
  IntList ints(const char* key, int64_t fallback, size_t n) const {
    Arg a = get(key, fallback);
    if (const auto* l = std::get_if<IntList>(&a.value)) {
      if (l->size() == 1 && n > 1) return IntList(n, l->front());
      return *l;
    }
    if (const auto* s = std::get_if<SymInt>(&a.value)) return IntList(n, *s);
    fail("{}: argument '{}' is not an int list", op, key);
  }
};

int64_t wrap(int64_t d, size_t rank) { return d < 0 ? d + static_cast<int64_t>(rank) : d; }

// x in `shape` (one entry may be -1): a view when x is dense, else a dense copy viewed.
ValueRef reshape(Graph& g, ValueRef x, IntList shape, const std::string& name) {
  const TensorMeta& m = g.meta(x);
  SymInt known = 1;
  int infer = -1;
  for (size_t i = 0; i < shape.size(); ++i) {
    if (shape[i] == SymInt(-1)) infer = static_cast<int>(i);
    else known = known * shape[i];
  }
  if (infer >= 0) {
    auto total = product(m.sizes).constant(), part = known.constant();
    if (!total || !part || *part == 0) fail("reshape: cannot infer the -1 in a shape of symbolic or zero size");
    shape[static_cast<size_t>(infer)] = *total / *part;
  }
  if (!m.is_contiguous()) x = g.call1(OpKind::Clone, {x}, {{"memory_format", std::string("contiguous_format")}}, g.fresh_name(name + "_dense"));
  return g.call1(OpKind::View, {x, shape}, {}, name);
}

ValueRef linear(Graph& g, const Args& a, const std::string& name) {
  ValueRef x = a.tensor("input"), w = a.tensor("weight");
  if (g.meta(x).sizes.empty()) fail("linear: the input is a 0-dim tensor; it needs at least one dim");
  if (g.meta(w).sizes.size() != 2) fail("linear: a weight of {} dims is not supported (2 dims: [out, in])", g.meta(w).sizes.size());
  ValueRef wt = g.call1(OpKind::Permute, {w, IntList{1, 0}}, {}, g.fresh_name(name + "_wt"));
  SymShape xs = g.meta(x).sizes;
  SymInt rows = 1;
  for (size_t d = 0; d + 1 < xs.size(); ++d) rows = rows * xs[d];
  ValueRef x2 = xs.size() == 2 ? x : reshape(g, x, {rows, xs.back()}, g.fresh_name(name + "_2d"));
  Arg bias = a.get("bias");
  std::string out2 = xs.size() == 2 ? name : g.fresh_name(name + "_2d");
  ValueRef y = bias.is_none() ? g.call1(OpKind::Mm, {x2, wt}, {}, out2) : g.call1(OpKind::Addmm, {bias, x2, wt}, {}, out2);
  if (xs.size() == 2) return y;
  IntList shape(xs.begin(), xs.end() - 1);
  shape.push_back(g.meta(w).sizes[0]);
  return g.call1(OpKind::View, {y, shape}, {}, name);
}

// matmul as mm (matrix rows flattened when only the left side has batch dims) or bmm (batch
// dims broadcast, then flattened); vectors become one-row or one-column matrices.
ValueRef matmul(Graph& g, const Args& a, const std::string& name) {
  ValueRef x = a.tensor("self"), y = a.tensor("other");
  SymShape xs = g.meta(x).sizes, ys = g.meta(y).sizes;
  if (xs.size() == 1 && ys.size() == 1) fail("matmul of two vectors (a dot product) is not supported");
  if (xs.empty() || ys.empty()) fail("matmul of a 0-dim tensor");
  if (ys.size() == 1) {  // [..., k] @ [k] = ([..., k] @ [k, 1])[..., 0]
    ValueRef col = g.call1(OpKind::View, {y, IntList{ys[0], 1}}, {}, g.fresh_name(name + "_col"));
    const std::map<std::string, Arg> operands = {{"self", Arg(x)}, {"other", Arg(col)}};
    Args inner{operands, a.op};
    ValueRef r = matmul(g, inner, g.fresh_name(name + "_mat"));
    return reshape(g, r, IntList(xs.begin(), xs.end() - 1), name);
  }
  if (xs.size() == 1) {  // [k] @ [..., k, n] = ([1, k] @ [..., k, n])[..., 0, :]
    ValueRef row = g.call1(OpKind::View, {x, IntList{1, xs[0]}}, {}, g.fresh_name(name + "_row"));
    const std::map<std::string, Arg> operands = {{"self", Arg(row)}, {"other", Arg(y)}};
    Args inner{operands, a.op};
    ValueRef r = matmul(g, inner, g.fresh_name(name + "_mat"));
    IntList shape(ys.begin(), ys.end() - 2);
    shape.push_back(ys.back());
    return reshape(g, r, shape, name);
  }
  const SymInt m = xs[xs.size() - 2], k = xs.back(), n = ys.back();
  if (ys.size() == 2) {
    if (xs.size() == 2) return g.call1(OpKind::Mm, {x, y}, {}, name);
    SymInt rows = 1;
    for (size_t d = 0; d + 1 < xs.size(); ++d) rows = rows * xs[d];
    ValueRef x2 = reshape(g, x, {rows, k}, g.fresh_name(name + "_2d"));
    ValueRef p = g.call1(OpKind::Mm, {x2, y}, {}, g.fresh_name(name + "_2d"));
    IntList shape(xs.begin(), xs.end() - 1);
    shape.push_back(n);
    return g.call1(OpKind::View, {p, shape}, {}, name);
  }
  // Batch dims broadcast from the right.
  size_t rank = std::max(xs.size(), ys.size()) - 2;
  IntList batch(rank);
  SymInt count = 1;
  for (size_t i = 0; i < rank; ++i) {
    auto dim = [&](const SymShape& s) {
      size_t lead = s.size() - 2;
      return i + lead >= rank ? s[i + lead - rank] : SymInt(1);
    };
    SymInt dx = dim(xs), dy = dim(ys);
    if (dx != dy && dx != SymInt(1) && dy != SymInt(1)) fail("matmul: batch dims {} and {} do not broadcast", dx.str(), dy.str());
    batch[i] = dx == SymInt(1) ? dy : dx;
    count = count * batch[i];
  }
  auto as_batched = [&](ValueRef v, const SymShape& s, const SymInt& r, const SymInt& c, const char* what) {
    IntList full = batch;
    full.push_back(r);
    full.push_back(c);
    if (!(SymShape(full) == s)) v = g.call1(OpKind::Expand, {v, full}, {}, g.fresh_name(name + "_" + what));
    return reshape(g, v, {count, r, c}, g.fresh_name(name + "_" + what + "3d"));
  };
  ValueRef p = g.call1(OpKind::Bmm, {as_batched(x, xs, m, k, "a"), as_batched(y, ys, k, n, "b")}, {}, g.fresh_name(name + "_3d"));
  IntList shape = batch;
  shape.push_back(m);
  shape.push_back(n);
  return g.call1(OpKind::View, {p, shape}, {}, name);
}

ValueRef convolution(Graph& g, const Args& a, const std::string& name) {
  ValueRef x = a.tensor("input"), w = a.tensor("weight");
  size_t k = g.meta(w).sizes.size() - 2;
  return g.call1(OpKind::Convolution,
                 {x, w, a.get("bias"), a.ints("stride", 1, k), a.ints("padding", 0, k), a.ints("dilation", 1, k), false,
                  IntList(k, 0), a.integer("groups", 1)},
                 {}, name);
}

std::vector<ValueRef> split(Graph& g, const Args& a, const std::vector<std::string>& names) {
  ValueRef x = a.tensor("self");
  const SymShape& s = g.meta(x).sizes;
  int64_t dim = wrap(a.integer("dim", 0), s.size()), each = a.integer("split_size", 0);
  if (dim < 0 || dim >= static_cast<int64_t>(s.size())) fail("split: dim {} out of range for rank {}", a.integer("dim", 0), s.size());
  auto total = s[static_cast<size_t>(dim)].constant();
  if (!total || each <= 0) fail("split: needs a positive split size over a dim of static size");
  // One piece per output the node lists (an empty dim still gives one): counted first, so a
  // split size of 1 over a dim of 2^40 is an error, not 2^40 pieces.
  const int64_t pieces = std::max<int64_t>(*total / each + (*total % each != 0), 1);
  if (pieces != static_cast<int64_t>(names.size()))
    fail("split: {} pieces of {} make {} outputs, but the node has {}", *total, each, pieces, names.size());
  IntList sizes;
  for (int64_t i = 0; i < pieces; ++i) sizes.push_back(std::min(each, *total - i * each));
  return g.call(OpKind::SplitWithSizes, {x, sizes, dim}, {}, names);
}

// RMS normalization as PyTorch's composite computes it (_fused_rms_norm): in f32 (f64 for f64
// inputs), x * rsqrt(mean(x^2) + eps) * weight, then the input's dtype; eps defaults to the
// computation type's epsilon.
ValueRef rms_norm(Graph& g, const Args& a, const std::string& name) {
  ValueRef x = a.tensor("input");
  const DType t = g.meta(x).dtype;
  if (!is_float(t)) fail("rms_norm: the input is {}, not a floating-point tensor", dtype_name(t));
  const DType compute = t == DType::f64 ? DType::f64 : DType::f32;
  IntList normalized = a.ints("normalized_shape", 0, 1);
  const int64_t rank = g.meta(x).dim();
  if (static_cast<int64_t>(normalized.size()) > rank) fail("rms_norm: normalized_shape is longer than the input's rank");
  IntList dims;
  for (size_t i = 0; i < normalized.size(); ++i) dims.push_back(rank - 1 - static_cast<int64_t>(i));
  double eps = compute == DType::f32 ? static_cast<double>(std::numeric_limits<float>::epsilon()) : std::numeric_limits<double>::epsilon();
  Arg given = a.get("eps");
  if (const auto* d = std::get_if<double>(&given.value)) eps = *d;
  else if (const auto* s = std::get_if<SymInt>(&given.value); s && s->constant()) eps = static_cast<double>(*s->constant());
  auto step = [&](OpKind op, std::vector<Arg> args, std::vector<std::pair<std::string, Arg>> kw = {}) {
    return g.call1(op, std::move(args), std::move(kw), g.fresh_name(name + "_rms"));
  };
  ValueRef up = t == compute ? x : step(OpKind::ToCopy, {x}, {{"dtype", compute}});
  ValueRef mean = step(OpKind::MeanDim, {step(OpKind::PowTensorScalar, {up, int64_t{2}}), dims, true});
  ValueRef y = step(OpKind::MulTensor, {up, step(OpKind::Rsqrt, {step(OpKind::AddScalar, {mean, eps})})});
  if (!a.get("weight").is_none()) y = step(OpKind::MulTensor, {y, a.tensor("weight")});
  if (g.meta(y).dtype == t) return g.call1(OpKind::Clone, {y}, {{"memory_format", std::string("contiguous_format")}}, name);
  return g.call1(OpKind::ToCopy, {y}, {{"dtype", t}}, name);
}

// softmax.int / log_softmax.int: the input cast to `dtype` when one is given, then the Core op.
ValueRef softmax(Graph& g, const Args& a, bool log, const std::string& name) {
  ValueRef x = a.tensor("self");
  if (Arg dtype = a.get("dtype"); !dtype.is_none())
    x = g.call1(OpKind::ToCopy, {x}, {{"dtype", dtype}}, g.fresh_name(name + "_in"));
  return g.call1(log ? OpKind::LogSoftmax : OpKind::Softmax, {x, a.integer("dim", 0), false}, {}, name);
}

}  // namespace

bool export_decomposes(const std::string& op) {
  static const std::set<std::string> ops = {"linear", "t", "layer_norm", "batch_norm", "conv1d", "conv2d", "conv3d", "matmul",
                                            "reshape", "split.Tensor", "transpose.int", "arange", "arange.start", "max_pool2d",
                                            "adaptive_avg_pool2d", "flatten.using_ints", "softmax.int", "log_softmax.int",
                                            "rms_norm", "dropout", "unflatten.int", "contiguous", "to.dtype", "pad",
                                            "narrow"};
  return ops.count(op) > 0;
}

std::vector<ValueRef> decompose_export_op(Graph& g, const std::string& op, const std::map<std::string, Arg>& args,
                                          const std::vector<std::string>& names) {
  Args a{args, op};
  if (names.empty() || names[0].empty()) fail("{}: expected a tensor output", op);
  const std::string& name = names[0];
  auto one = [](ValueRef v) { return std::vector<ValueRef>{v}; };
  if (op == "linear") return one(linear(g, a, name));
  if (op == "t") return one(g.call1(OpKind::Permute, {a.tensor("self"), IntList{1, 0}}, {}, name));
  if (op == "matmul") return one(matmul(g, a, name));
  if (op == "reshape") return one(reshape(g, a.tensor("self"), a.ints("shape", 0, 1), name));
  if (op == "split.Tensor") return split(g, a, names);
  if (op == "softmax.int" || op == "log_softmax.int") return one(softmax(g, a, op == "log_softmax.int", name));
  if (op == "rms_norm") return one(rms_norm(g, a, name));
  if (op == "dropout") {  // identity in eval mode; training draws random masks, which coil does not
    Arg train = a.get("train", false);
    if (const auto* t = std::get_if<bool>(&train.value); t && *t)
      fail("dropout in training mode is not supported (export the model after .eval())");
    return one(g.call1(OpKind::Clone, {a.tensor("input")}, {}, name));
  }
  if (op == "to.dtype")  // a copy in the new dtype (torch.export keeps `.float()` as to.dtype)
    return one(g.call1(OpKind::ToCopy, {a.tensor("self")}, {{"dtype", a.at("dtype")}}, name));
  if (op == "contiguous")
    return one(g.call1(OpKind::Clone, {a.tensor("self")}, {{"memory_format", std::string("contiguous_format")}}, name));
  if (op == "pad") {  // F.pad: constant padding is constant_pad_nd (negative amounts crop)
    Arg mode = a.get("mode", std::string("constant"));
    const auto* m = std::get_if<std::string>(&mode.value);
    if (!m || *m != "constant")
      fail("pad: mode '{}' is not supported when reading a .pt2 (only 'constant'); export after "
           "run_decompositions(), or compile the model with torch.compile(backend=\"coil\")",
           m ? *m : std::string("?"));
    Arg value = a.get("value");
    if (value.is_none()) value = Arg(0.0);
    return one(g.call1(OpKind::ConstantPadNd, {a.tensor("self"), a.at("pad"), value}, {}, name));
  }
  if (op == "narrow") {  // the view slice(dim, start, start + length); a negative start counts from the end
    ValueRef x = a.tensor("self");
    const SymShape& sizes = g.meta(x).sizes;
    const int64_t dim = wrap(a.integer("dim", 0), sizes.size());
    if (sizes.empty() || dim < 0 || dim >= static_cast<int64_t>(sizes.size()))
      fail("narrow: dim {} out of range for rank {}", a.integer("dim", 0), sizes.size());
    const SymInt& size = sizes[static_cast<size_t>(dim)];
    int64_t start = a.integer("start", 0), length = a.integer("length", 0);
    if (start < 0 && size.constant()) start += *size.constant();
    if (start < 0 || length < 0 || (size.constant() && start + length > *size.constant()))
      fail("narrow: start {} and length {} do not fit dim {} of size {}", a.integer("start", 0), length, dim, size.str());
    return one(g.call1(OpKind::SliceTensor, {x, dim, start, start + length, int64_t{1}}, {}, name));
  }
  if (op == "unflatten.int") {  // dim split into `sizes` (one may be -1)
    ValueRef x = a.tensor("self");
    const SymShape& sizes = g.meta(x).sizes;
    int64_t dim = wrap(a.integer("dim", 0), std::max<size_t>(sizes.size(), 1));
    if (dim < 0 || dim >= static_cast<int64_t>(sizes.size())) fail("unflatten: dim {} out of range for rank {}", dim, sizes.size());
    IntList parts = a.ints("sizes", 0, 1);
    IntList shape(sizes.begin(), sizes.begin() + dim);
    shape.insert(shape.end(), parts.begin(), parts.end());
    shape.insert(shape.end(), sizes.begin() + dim + 1, sizes.end());
    return one(reshape(g, x, shape, name));
  }
  if (op == "flatten.using_ints") {  // dims start_dim..end_dim merged into one
    ValueRef x = a.tensor("self");
    const SymShape& sizes = g.meta(x).sizes;
    size_t rank = std::max<size_t>(sizes.size(), 1);
    int64_t first = wrap(a.integer("start_dim", 0), rank), last = wrap(a.integer("end_dim", -1), rank);
    if (first < 0 || last >= static_cast<int64_t>(rank) || first > last) fail("flatten: dims {}..{} out of range for rank {}", first, last, rank);
    IntList shape(sizes.begin(), sizes.begin() + first);
    SymInt merged = 1;
    for (int64_t d = first; d <= last && d < static_cast<int64_t>(sizes.size()); ++d) merged = merged * sizes[static_cast<size_t>(d)];
    shape.push_back(merged);
    if (last + 1 < static_cast<int64_t>(sizes.size())) shape.insert(shape.end(), sizes.begin() + last + 1, sizes.end());
    return one(reshape(g, x, shape, name));
  }
  if (op == "conv1d" || op == "conv2d" || op == "conv3d") return one(convolution(g, a, name));
  if (op == "transpose.int") {
    ValueRef x = a.tensor("self");
    const size_t rank = g.meta(x).sizes.size();
    const size_t range = std::max<size_t>(rank, 1);  // a 0-d tensor takes dims 0 and -1, as itself
    const int64_t d0 = wrap(a.integer("dim0", 0), range), d1 = wrap(a.integer("dim1", 0), range);
    if (std::min(d0, d1) < 0 || std::max(d0, d1) >= static_cast<int64_t>(range))
      fail("transpose: dims {} and {} out of range for rank {}", a.integer("dim0", 0), a.integer("dim1", 0), rank);
    IntList dims;
    for (size_t i = 0; i < rank; ++i) dims.push_back(static_cast<int64_t>(i));
    if (rank > 0) std::swap(dims[static_cast<size_t>(d0)], dims[static_cast<size_t>(d1)]);
    return one(g.call1(OpKind::Permute, {x, dims}, {}, name));
  }
  if (op == "layer_norm") {
    auto outs = g.call(OpKind::NativeLayerNorm,
                       {a.tensor("input"), a.at("normalized_shape"), a.get("weight"), a.get("bias"), a.get("eps", 1e-5)}, {},
                       {name, g.fresh_name(name + "_mean"), g.fresh_name(name + "_rstd")});
    return one(outs[0]);
  }
  if (op == "batch_norm") {
    if (const auto* t = std::get_if<bool>(&a.at("training").value); t && *t)
      fail("batch_norm in training mode is not supported (export the model after .eval())");
    if (a.get("running_mean").is_none() || a.get("running_var").is_none())
      fail("batch_norm without running statistics is not supported");
    auto outs = g.call(OpKind::BatchNormNoTraining,
                       {a.tensor("input"), a.get("weight"), a.get("bias"), a.at("running_mean"), a.at("running_var"),
                        a.get("momentum", 0.1), a.get("eps", 1e-5)},
                       {}, {name, g.fresh_name(name + "_mean"), g.fresh_name(name + "_invstd")});
    return one(outs[0]);
  }
  if (op == "max_pool2d") {  // the values of max_pool2d_with_indices (their indices unused)
    IntList stride = a.get("stride").is_none() ? IntList{} : a.ints("stride", 0, 2);
    auto outs = g.call(OpKind::MaxPool2dWithIndices, {a.tensor("self"), a.ints("kernel_size", 0, 2), stride, a.ints("padding", 0, 2),
                                                      a.ints("dilation", 1, 2), a.get("ceil_mode", false)},
                       {}, {name, g.fresh_name(name + "_indices")});
    return one(outs[0]);
  }
  if (op == "adaptive_avg_pool2d") return one(g.call1(OpKind::AdaptiveAvgPool2d, {a.tensor("self"), a.ints("output_size", 0, 2)}, {}, name));
  if (op == "arange" || op == "arange.start") {  // arange.start_step with its defaults
    std::vector<std::pair<std::string, Arg>> keywords(args.begin(), args.end());
    if (!args.count("start")) keywords.emplace_back("start", Arg(int64_t{0}));
    return g.call(OpKind::ArangeStartStep, {}, std::move(keywords), {name});
  }
  fail("{} is not one of the ops decomposed on reading", op);
}

}  // namespace coil::frontend
