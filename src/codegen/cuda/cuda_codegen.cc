#include "codegen/cuda/cuda_codegen.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cctype>
#include <climits>
#include <map>
#include <set>

#include "build/cache.h"
#include "codegen/c_printer.h"
#include "codegen/cuda/emitter.h"
#include "codegen/cuda/jam.h"
#include "codegen/cuda/launch.h"
#include "support/check.h"

namespace coil::codegen {

extern const char* const cuda_prelude;
extern const char* const cuda_special;

namespace {

const char* form_name(CudaConfig::Form f) {
  switch (f) {
    case CudaConfig::Form::pointwise: return "pointwise";
    case CudaConfig::Form::tiled: return "tiled";
    case CudaConfig::Form::row: return "row";
    case CudaConfig::Form::column: return "column";
    case CudaConfig::Form::scan: return "scan";
    case CudaConfig::Form::attention: return "attention";
    case CudaConfig::Form::gemv: return "gemv";
    case CudaConfig::Form::serial: return "serial";
    case CudaConfig::Form::scatter: return "scatter";
  }
  return "?";
}

// Every subexpression of `e` stays within 32-bit range over `env`.
bool fits_int32(const SymInt& e, const RangeEnv& env) {
  Range r = bounds(e, env);
  if (r.lo < INT32_MIN || r.hi > INT32_MAX) return false;
  return std::all_of(e.operands().begin(), e.operands().end(), [&](const SymInt& o) { return fits_int32(o, env); });
}

bool exprs_fit_int32(const loop::ExprRef& e, const RangeEnv& env) {
  if ((e->kind() == loop::Expr::Kind::load || e->kind() == loop::Expr::Kind::index) && !fits_int32(e->offset(), env)) return false;
  return std::all_of(e->operands().begin(), e->operands().end(), [&](const loop::ExprRef& o) { return exprs_fit_int32(o, env); });
}

}  // namespace

int64_t grid_blocks(const CudaLaunch& l, int64_t units) {
  return std::clamp<int64_t>((units + l.per_block - 1) / l.per_block, 1, l.max_blocks);
}

std::vector<std::string> size_parameters(const std::vector<std::string>& used, const std::vector<std::string>& symbols, CudaKernel& info) {
  std::vector<std::string> params;
  for (size_t i = 0; i < symbols.size(); ++i)
    if (std::find(used.begin(), used.end(), symbols[i]) != used.end()) {
      params.push_back("const int64_t " + symbol_name(symbols[i]));
      info.symbols.push_back(static_cast<int>(i));
    }
  return params;
}

std::vector<int64_t> size_bucket(const std::vector<int64_t>& values) {
  std::vector<int64_t> bucket;
  for (int64_t v : values) {
    int64_t p = 1;
    while (p < v && p < (int64_t{1} << 62)) p *= 2;
    bucket.push_back(p);
  }
  return bucket;
}

std::vector<int64_t> size_bucket(const CudaKernel& info, const std::vector<int64_t>& symbol_values) {
  std::vector<int64_t> values;
  for (int s : info.symbols) values.push_back(symbol_values[static_cast<size_t>(s)]);
  return size_bucket(values);
}

std::string to_string(const CudaConfig& c) {
  std::string s = fmt::format("{} block={}", form_name(c.form), c.block);
  if (c.block_y > 1) s += fmt::format("x{}", c.block_y);
  if (c.form == CudaConfig::Form::row) s += fmt::format(" tpr={}", c.threads_per_row);
  if (c.vector > 1) s += fmt::format(" vector={}", c.vector);
  if (c.persistent) s += fmt::format(" persistent={}", c.persistent);
  if (c.splits > 1) s += fmt::format(" splits={}", c.splits);
  if (c.tile_a) s += fmt::format(" tile={}x{}", c.tile_a, c.tile_b);
  if (c.jam > 1) s += fmt::format(" jam={}", c.jam);
  if (c.parts > 1) s += fmt::format(" parts={}", c.parts);
  if (c.listed) s += " listed";
  return s;
}

CudaEmitter::CudaEmitter(const loop::Program& p, const loop::LoopKernel& k, const std::vector<std::string>& symbols,
                         const cuda::DeviceInfo& device, const CudaConfig& config)
    : p_(p), k_(k), symbols_(symbols), device_(device), config_(config) {
  std::vector<std::string> names;
  for (size_t i = 0; i < p.buffers.size(); ++i) names.push_back("b" + std::to_string(i));
  printer_ = std::make_unique<ExprPrinter>(names);
  for (size_t i = 0; i < k.outer.size(); ++i) add_range(loop::loop_var(static_cast<int>(i)), k.outer[i]);
  for (size_t i = 0; i < k.inner.size(); ++i) add_range(loop::reduce_var(static_cast<int>(i)), k.inner[i]);
  // A lane variable one past the outer ones walks a thread's vector (x<m> in [0, vector)).
  ranges_[loop::loop_var(static_cast<int>(k.outer.size()))] = Range{0, std::max(config.vector, config.block) - 1};
  narrow_ = is_narrow();
  printer_->style = IndexStyle{narrow_, &ranges_};
  mask_ = device.warp_size >= 32 ? "0xffffffffu" : fmt::format("0x{:x}u", (1u << device.warp_size) - 1);
}

void CudaEmitter::add_range(const std::string& var, const SymInt& extent) {
  auto e = extent.constant();
  ranges_[var] = Range{0, e ? std::max<int64_t>(*e - 1, 0) : Range::kMax};
}

bool CudaEmitter::is_narrow() const {
  for (const auto& d : k_.outer)
    if (!d.constant()) return false;
  for (const auto& d : k_.inner)
    if (!d.constant()) return false;
  int64_t work = 1;
  for (const auto& d : k_.outer) work *= *d.constant();
  for (const auto& d : k_.inner) work *= *d.constant();
  if (work >= INT32_MAX / 2) return false;
  for (const auto& r : k_.reductions)
    if (!exprs_fit_int32(r.value, ranges_)) return false;
  for (const auto& s : k_.stores) {
    if (!fits_int32(s.offset, ranges_) || !exprs_fit_int32(s.value, ranges_)) return false;
    if (s.dynamic && !exprs_fit_int32(s.dynamic, ranges_)) return false;
  }
  return true;
}

std::string CudaEmitter::idx(const SymInt& e) const { return index_expr(e, printer_->style); }

const char* CudaEmitter::element_type(int buffer) const { return storage_type(p_.buffers[static_cast<size_t>(buffer)].dtype); }

std::string CudaEmitter::vec_type(int buffer, int n) const { return fmt::format("coil_rt::Vec<{}, {}>", element_type(buffer), n); }

std::string CudaEmitter::whole_load(const std::string& vec, int buffer, const std::string& index) {
  return fmt::format("coil_rt::load_keep(reinterpret_cast<const {}*>(b{} + ({})))", vec, buffer, index);
}

void CudaEmitter::flush(std::vector<std::string>& lines) {
  for (const auto& l : lines) text_ += l + "\n";
  lines.clear();
}

std::string CudaEmitter::emit(CudaKernel& info) {
  loop::Access access = loop::access(k_);
  std::set<int> buffers = access.reads;
  buffers.insert(access.writes.begin(), access.writes.end());
  std::vector<std::string> used = kernel_symbols(k_);

  info.name = k_.name;
  info.config = config_;
  info.launch = launch_for(k_, config_, device_);
  std::vector<std::string> params;
  for (int b : buffers) {
    const loop::Buffer& buf = p_.buffers[static_cast<size_t>(b)];
    bool written = access.writes.count(b) > 0;
    params.push_back(fmt::format("{}{}* __restrict__ b{}", written ? "" : "const ", storage_type(buf.dtype), b));
    info.buffers.push_back(b);
  }
  for (auto& sp : size_parameters(used, symbols_, info)) params.push_back(std::move(sp));
  params.push_back("int64_t* __restrict__ E");
  if (info.launch.scratch_bytes > 0) params.push_back("unsigned char* __restrict__ W");
  int threads = config_.block * config_.block_y;
  out("// computes %{} ({})", fmt::join(k_.origins, ", %"), to_string(config_));
  out("extern \"C\" __global__ void __launch_bounds__({}) {}({}) {{", threads, k_.name, fmt::join(params, ", "));
  out("  coil_rt::after_previous();");
  out("  typedef {} idx_t;", narrow_ ? "int" : "int64_t");
  out("  (void)E;");
  switch (config_.form) {
    case CudaConfig::Form::pointwise:
    case CudaConfig::Form::serial: pointwise(); break;
    case CudaConfig::Form::scatter: scatter(); break;
    case CudaConfig::Form::tiled: tiled(); break;
    case CudaConfig::Form::row: row(); break;
    case CudaConfig::Form::column: column(); break;
    case CudaConfig::Form::scan: scan(); break;
    case CudaConfig::Form::attention:
    case CudaConfig::Form::gemv: COIL_CHECK(false) << form_name(config_.form) << " is no loop kernel"; break;
  }
  out("}}");
  return text_;
}

// Row-major decomposition of `linear` into `vars` over `extents` (the last one fastest).
void CudaEmitter::decompose(const std::string& linear, const std::vector<std::string>& vars, const std::vector<SymInt>& extents,
                            const std::string& indent) {
  if (vars.empty()) return;
  if (vars.size() == 1) {
    out("{}const idx_t {} = {};", indent, vars[0], linear);
    return;
  }
  out("{}idx_t {}_rest = {};", indent, vars[0], linear);
  for (size_t d = vars.size(); d-- > 1;) {
    std::string extent = idx(extents[d]);
    out("{}const idx_t {} = {}_rest % ({});", indent, vars[d], vars[0], extent);
    out("{}{}_rest /= ({});", indent, vars[0], extent);
  }
  out("{}const idx_t {} = {}_rest;", indent, vars[0], vars[0]);
}

std::vector<std::string> CudaEmitter::outer_vars(size_t count) const {
  std::vector<std::string> v;
  for (size_t i = 0; i < count; ++i) v.push_back(loop::loop_var(static_cast<int>(i)));
  return v;
}

std::vector<std::string> CudaEmitter::inner_vars() const {
  std::vector<std::string> v;
  for (size_t i = 0; i < k_.inner.size(); ++i) v.push_back(loop::reduce_var(static_cast<int>(i)));
  return v;
}

void CudaEmitter::store(const loop::StoreStep& s, const std::string& indent, std::vector<std::string>& lines) {
  std::string v = stored(s.value, p_.buffers[static_cast<size_t>(s.buffer)].dtype, lines, indent);
  std::string dynamic = s.dynamic ? " + " + printer_->emit(s.dynamic, lines, indent) : "";
  flush(lines);
  out("{}b{}[{}{}] = {};", indent, s.buffer, idx(s.offset), dynamic, v);
}

std::string CudaEmitter::stored(const loop::ExprRef& value, DType t, std::vector<std::string>& lines, const std::string& indent) {
  return stored_value(*printer_, value, t, lines, indent);
}

std::string emit_cuda_kernel(const loop::Program& program, const loop::LoopKernel& original, const std::vector<std::string>& symbols,
                             const cuda::DeviceInfo& device, const CudaConfig& config, CudaKernel& info) {
  const loop::LoopKernel kernel = config.jam > 1 ? jammed(original, window_dim(original), config.jam) : original;
  if (config.form != CudaConfig::Form::column || config.vector == 1) return CudaEmitter(program, kernel, symbols, device, config).emit(info);
  // Vectorized columns: the body as seen from lane x<m> of a thread's adjacent outputs.
  std::string last = loop::loop_var(static_cast<int>(kernel.outer.size()) - 1);
  std::map<std::string, SymInt> shift{{last, SymInt::symbol(last) + SymInt::symbol(loop::loop_var(static_cast<int>(kernel.outer.size())))}};
  loop::LoopKernel lanes = kernel;
  for (auto& r : lanes.reductions) r.value = loop::substitute(r.value, shift);
  for (auto& st : lanes.stores) {
    st.value = loop::substitute(st.value, shift);
    st.offset = substitute(st.offset, shift);
  }
  return CudaEmitter(program, lanes, symbols, device, config).emit(info);
}

std::string emit_tunable_kernel(const loop::Program& program, size_t index, const std::string& name, const std::vector<std::string>& symbols,
                                const cuda::DeviceInfo& device, const CudaConfig& config, CudaKernel& info) {
  if (const auto* call = std::get_if<loop::ExternCall>(&program.kernels[index])) {
    loop::ExternCall named = *call;
    named.name = name;
    return emit_cuda_gemv(program, named, config, info);
  }
  loop::LoopKernel named = std::get<loop::LoopKernel>(program.kernels[index]);
  named.name = name;
  return emit_cuda_kernel(program, named, symbols, device, config, info);
}

std::string CudaSource::code() const {
  std::string code = prelude;
  for (const auto& b : bodies) code += b + "\n";
  return code;
}

CudaSource generate_cuda(const loop::Program& program, const std::vector<std::string>& symbols, const cuda::DeviceInfo& device,
                         int candidate) {
  CudaSource src;
  src.prelude = "// Generated by coil for " + device.arch() + ".\n" + with_scalar_helpers(cuda_prelude) + "\n";
  if (uses_special_functions(program)) src.prelude += with_special_helpers(cuda_special) + "\n";
  for (size_t i = 0; i < program.kernels.size(); ++i) {
    CudaKernel info;
    info.program_index = i;
    if (const auto* call = std::get_if<loop::ExternCall>(&program.kernels[i]); call && call->kind == loop::ExternKind::attention) {
      src.bodies.push_back(emit_cuda_attention(program, *call, symbols, device, info));
      src.kernels.push_back(std::move(info));
      continue;
    }
    auto pick = [&](const std::vector<CudaConfig>& configs) {
      return candidate < 0 ? configs.front() : configs[std::min<size_t>(static_cast<size_t>(candidate), configs.size() - 1)];
    };
    if (const auto* call = std::get_if<loop::ExternCall>(&program.kernels[i]); call && loop::is_product(call->kind)) {
      auto configs = gemv_configs(program, *call, device);
      // (cuBLASLt runs it; a call with a prologue or epilogue of coil's has only this kernel)
      COIL_CHECK(!configs.empty() || !loop::fused_with_loops(*call)) << call->name << ": a fused prologue or epilogue the few-row kernel cannot run";
      if (configs.empty()) continue;
      src.bodies.push_back(emit_cuda_gemv(program, *call, pick(configs), info));
      src.kernels.push_back(std::move(info));
      continue;
    }
    const auto* k = std::get_if<loop::LoopKernel>(&program.kernels[i]);
    if (!k) continue;
    CudaConfig config = pick(candidate_configs(program, *k, device));
    src.bodies.push_back(emit_cuda_kernel(program, *k, symbols, device, config, info));
    src.kernels.push_back(std::move(info));
  }
  return src;
}

namespace {

// `text` with each identifier-like word mapped by `word`; string literals (inline PTX: ".b16")
// and everything else kept as they are, `//` comments (which name the graph values) dropped.
template <typename F>
std::string map_words(const std::string& text, F&& word) {
  std::string out;
  out.reserve(text.size());
  auto in_word = [](char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '_'; };
  for (size_t i = 0; i < text.size();) {
    if (text.compare(i, 2, "//") == 0) {
      i = text.find('\n', i);
      if (i == std::string::npos) break;
      continue;
    }
    size_t j = i + 1;
    if (text[i] == '"') {
      while (j < text.size() && text[j] != '"') j += text[j] == '\\' ? 2 : 1;
      j = std::min(j + 1, text.size());
      out.append(text, i, j - i);
    } else if (in_word(text[i])) {
      while (j < text.size() && in_word(text[j])) ++j;
      out += word(std::string_view(text.data() + i, j - i));
    } else {
      out += text[i];
    }
    i = j;
  }
  return out;
}

bool digits_from(std::string_view t, size_t from) {
  return t.size() > from &&
         std::all_of(t.begin() + static_cast<std::ptrdiff_t>(from), t.end(), [](char c) { return std::isdigit(static_cast<unsigned char>(c)); });
}

}  // namespace

std::pair<std::string, std::string> content_named_kernel(const std::string& canonical, const std::string& readable) {
  std::string stem;
  for (size_t i = 0; i <= readable.size();) {
    size_t j = std::min(readable.find('_', i), readable.size());
    std::string_view token(readable.data() + i, j - i);
    bool numbered = digits_from(token, 0) || (i == 0 && token.size() > 1 && token[0] == 'k' && digits_from(token, 1)) ||
                    (j == readable.size() && token.size() > 1 && token[0] == 'c' && digits_from(token, 1));
    if (!token.empty() && !numbered) stem += (stem.empty() ? "" : "_") + std::string(token);
    i = j + 1;
  }
  std::string name = (stem.empty() ? "k" : stem) + "_" + build::ArtifactCache::key({canonical}).substr(0, 16);
  return {name, map_words(canonical, [&](std::string_view token) { return token == "K_" ? name : std::string(token); })};
}

std::string canonical_kernel_text(const std::string& body, const std::string& name) {
  std::map<std::string, std::string, std::less<>> renamed;
  return map_words(body, [&](std::string_view token) {
    if (token == name) return std::string("K_");
    if (token.size() > 1 && token[0] == 'b' && digits_from(token, 1))
      return renamed.try_emplace(std::string(token), "B_" + std::to_string(renamed.size())).first->second;
    return std::string(token);
  });
}

}  // namespace coil::codegen
