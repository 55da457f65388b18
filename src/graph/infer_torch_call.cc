// Output metadata of torch_call: declared by the node (its `outputs` string), since the call is
// the embedder's; checked for well-formedness only.
#include <charconv>

#include "graph/infer_ops.h"
#include "graph/infer_util.h"
#include "support/check.h"

namespace coil {

namespace {

std::vector<std::string_view> split(std::string_view s, char by) {
  std::vector<std::string_view> parts;
  size_t start = 0;
  while (true) {
    size_t at = s.find(by, start);
    parts.push_back(s.substr(start, at == std::string_view::npos ? std::string_view::npos : at - start));
    if (at == std::string_view::npos) return parts;
    start = at + 1;
  }
}

SymShape numbers(std::string_view s, const std::string& what) {
  SymShape out;
  if (s.empty()) return out;
  for (std::string_view part : split(s, ',')) {
    int64_t v = 0;
    auto [end, ec] = std::from_chars(part.data(), part.data() + part.size(), v);
    if (ec != std::errc() || end != part.data() + part.size() || v < 0) fail("{}: '{}' is not a size or stride", what, part);
    out.push_back(SymInt(v));
  }
  return out;
}

}  // namespace

std::vector<TensorMeta> infer_torch_call(const ArgReader& a) {
  const std::string& op = a.op_name();
  auto inputs = a.tensor_list("inputs");
  if (inputs.empty() || !inputs[0]) fail("{}: a call takes at least one tensor", op);
  for (const auto& t : inputs)
    if (!t || t->device != inputs[0]->device) fail("{}: every input must be a tensor on {}", op, device_name(inputs[0]->device));
  if (a.integer("index") < 0) fail("{}: index must be >= 0", op);
  const std::string spec = a.opt_str("outputs").value_or("");
  if (spec.empty()) fail("{}: a call declares at least one output", op);
  std::vector<TensorMeta> out;
  for (std::string_view entry : split(spec, ';')) {
    auto fields = split(entry, ':');
    if (fields.size() != 3) fail("{}: output '{}' is not dtype:sizes:strides", op, entry);
    auto dtype = dtype_from_name(fields[0]);
    if (!dtype) fail("{}: unknown dtype '{}'", op, fields[0]);
    TensorMeta m = TensorMeta::contiguous(*dtype, numbers(fields[1], op), inputs[0]->device);
    m.strides = numbers(fields[2], op);
    if (m.strides.size() != m.sizes.size()) fail("{}: output '{}' has {} sizes and {} strides", op, entry, m.sizes.size(), m.strides.size());
    out.push_back(std::move(m));
  }
  return out;
}

}  // namespace coil
