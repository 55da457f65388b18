// The CUDA kernel emitter, shared by its forms: cuda_codegen.cc (signature, index width,
// helpers), cuda_pointwise.cc (pointwise, vectorized, tiled, serial), cuda_reduction.cc (row,
// scan) and cuda_column.cc (column). Internal to src/codegen/cuda.
#pragma once
#include <fmt/format.h>

#include <functional>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "arith/bounds.h"
#include "codegen/c_printer.h"
#include "codegen/cuda/cuda_codegen.h"
#include "codegen/cuda/row_values.h"

namespace coil::codegen {

struct SplitLayout;  // launch.h

class CudaEmitter {
 public:
  CudaEmitter(const loop::Program& p, const loop::LoopKernel& k, const std::vector<std::string>& symbols,
              const cuda::DeviceInfo& device, const CudaConfig& config);
  std::string emit(CudaKernel& info);

 private:
  template <typename... Args>
  void out(fmt::format_string<Args...> f, Args&&... args) {
    text_ += fmt::format(f, std::forward<Args>(args)...) + "\n";
  }
  void add_range(const std::string& var, const SymInt& extent);
  bool is_narrow() const;
  std::string idx(const SymInt& e) const;
  const char* element_type(int buffer) const;          // the C type buffer b<buffer> holds
  std::string vec_type(int buffer, int n) const;       // coil_rt::Vec of n of its elements
  // One aligned access of `vec` (a Vec type) at element `index` of buffer b<buffer>, kept in L2
  // over the outputs (coil_rt::load_keep).
  static std::string whole_load(const std::string& vec, int buffer, const std::string& index);
  void flush(std::vector<std::string>& lines);
  void decompose(const std::string& linear, const std::vector<std::string>& vars, const std::vector<SymInt>& extents,
                 const std::string& indent);
  std::vector<std::string> outer_vars(size_t count) const;
  std::vector<std::string> inner_vars() const;
  void store(const loop::StoreStep& s, const std::string& indent, std::vector<std::string>& lines);

  // cuda_pointwise.cc
  void pointwise();
  void scatter();
  void listed_scatter_body();
  void tiled();
  // cuda_reduction.cc
  void row();
  void scan();
  void reduction_passes(const std::string& indent, const std::string& active, bool column_form);
  void accumulate(size_t i, const std::string& indent, std::vector<std::string>& lines);
  void combine(size_t first, size_t end, const std::string& indent);
  void name_reduced(size_t first, size_t end, const std::string& indent);
  std::pair<std::string, std::string> partial_type(size_t i) const;
  std::string combiner_of(size_t i) const;  // the combining functor of step i's partials
  std::string split_partials(const SplitLayout& layout, size_t i) const;
  void merge_splits(const std::string& indent);
  // cuda_column.cc
  void column();
  int column_group(size_t i) const;
  void column_round(size_t i, int g, const std::string& indent, const std::function<void(const std::string&)>& body);
  void column_spread(size_t i, int g, const std::string& indent);
  void each_column(int group, const std::string& indent, const std::function<void(const std::string&)>& body);
  void column_combine(size_t first, size_t end, const std::string& indent);
  void two_pass_moments(size_t i, const std::string& indent, const std::string& active);
  void find_column_steps();
  bool column_pointers() const { return !column_steps_.empty(); }
  void open_column_pointers(const std::string& indent, const std::string& first_row);
  void column_pointer_loads(const std::string& indent);
  std::string row_loop_open(const std::string& indent, const std::string& active);
  void counted_loop(const std::string& indent, const std::string& var, const std::string& start, const std::string& active,
                    const std::string& end, int64_t step, std::optional<int64_t> end_value);
  void row_loop_close(const std::string& indent);
  bool nested_row_loops() const;
  void cache_row_loads(const std::string& indent, const std::string& active);
  // Persistent rows: per-element values carried from one pass to later ones (row_values.h).
  void declare_carried(const std::string& indent);
  void keep_carried(size_t pass, const std::string& indent, std::vector<std::string>& lines);
  std::string carried_name(size_t i) const;
  void emit_reciprocals(size_t first, size_t end, const std::string& indent);
  std::string stored(const loop::ExprRef& value, DType t, std::vector<std::string>& lines, const std::string& indent);
  // Vectorized rows (config_.vector > 1): groups of `vector` adjacent elements of the row.
  struct Staged {
    int buffer;
    SymInt offset;
    std::string name;
    bool kept = true;  // persistent rows: read by a reduction, so kept in registers for the row
  };
  void find_row_vectors();
  void find_column_vectors();
  const Staged* staged(const loop::ExprRef& load) const;
  void hook_staged(std::function<std::string(const Staged&)> name);
  void stage_load(const std::string& indent, const Staged& access, const SymInt& offset);
  // Vectorized columns (column form, config_.vector > 1): a thread's `vector` adjacent outputs
  // are lanes (lane_var()) of arrays of partials, their loads staged as one access per row.
  bool column_lanes() const { return config_.form == CudaConfig::Form::column && config_.vector > 1; }
  std::string lane_var() const;
  std::string acc(size_t i) const;  // step i's partial: acc<i>, or acc<i>[lane]
  void lanes_open(const std::string& indent);
  void vector_load(const std::string& indent, const std::string& dest, int buffer, const SymInt& offset);

  const loop::Program& p_;
  const loop::LoopKernel& k_;
  const std::vector<std::string>& symbols_;
  const cuda::DeviceInfo& device_;
  CudaConfig config_;
  RangeEnv ranges_;
  bool narrow_ = false;
  bool split_pass_ = false;  // the row loop being opened is this block's share of a split row
  bool store_pass_ = false;  // the row loop being opened runs the inner stores
  std::vector<Staged> row_vec_loads_, row_vec_stores_;  // vectorized rows: unit-stride accesses
  // Vectorized columns over one reduction dim: each staged load's step along it, where every one
  // is affine in it (the loop reads through pointers; else empty).
  std::vector<int64_t> column_steps_;
  int column_loops_ = 0;  // column loops reading through pointers so far: numbers their pointers
  std::vector<CarriedValue> carried_;  // persistent rows
  std::set<int> reciprocal_slots_;      // row reductions: reduced values later divisions multiply by the reciprocal of
  std::string mask_;  // the warp's member mask for shuffles
  std::unique_ptr<ExprPrinter> printer_;
  std::string text_;
};

}  // namespace coil::codegen
