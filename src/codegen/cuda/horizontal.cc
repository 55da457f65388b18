#include "codegen/cuda/horizontal.h"

#include <fmt/format.h>

#include <algorithm>
#include <map>

#include "coil/error.h"
#include "support/check.h"

namespace coil::codegen {

namespace {

// `text` with every `from` replaced by `to` (blockIdx.x and gridDim.x: a member's block index
// and grid within the group's).
std::string replace_all(std::string text, const std::string& from, const std::string& to) {
  for (size_t at = text.find(from); at != std::string::npos; at = text.find(from, at + to.size())) text.replace(at, from.size(), to);
  return text;
}

// The parameter declarations of a generated kernel's first line, by parameter name.
std::vector<std::pair<std::string, std::string>> parameters(const std::string& body, const std::string& name) {
  size_t open = body.find(name + "(");
  COIL_CHECK(open != std::string::npos) << "no signature for " << name;
  open += name.size() + 1;
  size_t close = body.find(") {", open);
  COIL_CHECK(close != std::string::npos) << "no signature end for " << name;
  std::vector<std::pair<std::string, std::string>> out;
  std::string list = body.substr(open, close - open);
  for (size_t i = 0; i <= list.size();) {
    size_t j = std::min(list.find(", ", i), list.size());
    std::string decl = list.substr(i, j - i);
    out.emplace_back(decl.substr(decl.rfind(' ') + 1), decl);
    i = j + 2;
  }
  return out;
}

}  // namespace

bool horizontal_member(const loop::LoopKernel& k, const CudaKernel& info) {
  // (a scatter of one thread a point, each running its few positions in order, has the
  // pointwise form's grid-stride loop and no shared memory)
  const bool pointwise = info.config.form == CudaConfig::Form::pointwise && !loop::has_dynamic_stores(k);
  const bool scatter = info.config.form == CudaConfig::Form::scatter && info.config.parts == 1 && !info.config.listed;
  return (pointwise || scatter) && info.symbols.empty() && info.launch.scratch_bytes == 0 && info.launch.shared_bytes == 0 &&
         info.launch.block_y == 1 && info.launch.units.constant();
}

int64_t static_grid(const CudaKernel& info) { return grid_blocks(info.launch, *info.launch.units.constant()); }

std::string emit_horizontal_kernel(const std::string& name, const std::vector<std::string>& bodies,
                                   const std::vector<CudaKernel>& members, const std::vector<int64_t>& grids,
                                   CudaKernel& info) {
  COIL_CHECK(!members.empty() && bodies.size() == members.size() && grids.size() == members.size()) << "an empty horizontal group";
  const int block = members.front().launch.block_x;
  std::string out;
  std::map<int, std::string> declared;  // buffer id -> declaration, in the order first met
  std::vector<int> order;
  std::vector<std::string> calls;
  int64_t first_block = 0;
  for (size_t m = 0; m < members.size(); ++m) {
    const CudaKernel& k = members[m];
    COIL_CHECK(k.launch.block_x == block) << "a horizontal group of one block size";
    const std::string fn = fmt::format("{}_m{}", name, m);
    // The member as a device function of its block index and grid.
    std::string body = bodies[m];
    const std::string head = fmt::format("extern \"C\" __global__ void __launch_bounds__({}) {}(", block, k.name);
    const size_t at = body.find(head);
    COIL_CHECK(at != std::string::npos) << "unexpected signature of " << k.name;
    body.replace(at, head.size(), fmt::format("static __device__ __forceinline__ void {}(", fn));
    size_t close = body.find(") {", at);
    body.replace(close, 3, ", const unsigned coil_block, const unsigned coil_grid) {");
    body = replace_all(replace_all(body, "blockIdx.x", "coil_block"), "gridDim.x", "coil_grid");
    out += body + "\n";
    std::vector<std::string> args;
    for (const auto& [pname, decl] : parameters(bodies[m], k.name)) {
      if (pname == "E") {  // the member's own status words, three a kernel from the group's first
        const size_t step = k.program_index - members.front().program_index;
        args.push_back(step ? fmt::format("E + {}", 3 * step) : "E");
        continue;
      }
      args.push_back(pname);
      const int id = std::stoi(pname.substr(1));
      if (declared.emplace(id, decl).second) order.push_back(id);
    }
    args.push_back(fmt::format("block - {}u", first_block));
    args.push_back(fmt::format("{}u", grids[m]));
    calls.push_back(fmt::format("  if (block < {}u) {{\n    {}({});\n    return;\n  }}", first_block + grids[m], fn, fmt::join(args, ", ")));
    first_block += grids[m];
  }
  std::vector<std::string> params;
  for (int id : order) params.push_back(declared.at(id));
  params.push_back("int64_t* __restrict__ E");
  out += fmt::format("extern \"C\" __global__ void __launch_bounds__({}) {}({}) {{\n  const unsigned block = blockIdx.x;\n", block, name,
                     fmt::join(params, ", "));
  for (const auto& c : calls) out += c + "\n";
  out += "}\n";
  info = CudaKernel{};
  info.name = name;
  info.program_index = members.front().program_index;
  info.buffers = order;
  info.config = members.front().config;
  info.launch.block_x = block;
  info.launch.units = SymInt(first_block);
  info.launch.per_block = 1;
  info.launch.max_blocks = first_block;
  return out;
}

}  // namespace coil::codegen
