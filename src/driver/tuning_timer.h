// How the tuners time work on the device (autotune.h's loop-kernel candidates, autotune_gemm.h's
// cuBLASLt algorithms): operands filled with pseudo-random values, and the candidates taking
// turns round after round, each keeping the median of its samples.
#pragma once
#include <cstddef>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "coil/tensor.h"
#include "runtime/cuda/context.h"

namespace coil {

// Pseudo-random values in [-1, 1) of one dtype, 64 KiB of them, repeated over device buffers:
// the GPU's power draw, and so its clocks, follow the data, and constant operands would time
// every candidate at clocks that real data does not get. Integer buffers get zeros, a valid
// index. The copies are queued on the null stream; the destructor waits for them.
class RandomFill {
 public:
  explicit RandomFill(const cuda::Context& context) : context_(context) {}
  ~RandomFill();
  RandomFill(const RandomFill&) = delete;
  RandomFill& operator=(const RandomFill&) = delete;
  void operator()(cuda::DevicePtr p, size_t bytes, DType dtype);

 private:
  const cuda::Context& context_;
  std::map<DType, Tensor> blocks_;
};

struct TurnsOptions {
  double sample_ms = 0.3;  // each sample runs about this long (calls repeated)
  int rounds = 5;          // the candidates take turns this many times
  int max_repeats = 32;    // calls in one sample at most
  // The candidates within this fraction of the fastest take turns again (0: never), with samples
  // of runoff_sample_ms: short samples of a long kernel hold one call each, and its launch and
  // ramp hide differences that calls queued back to back show.
  double runoff_within = 0;
  double runoff_sample_ms = 2.0;
};

// The candidates a runoff takes: those whose median is within `within` (a fraction) of the
// fastest finite one, fastest first; none when fewer than two are.
std::vector<size_t> runoff_candidates(const std::vector<double>& ms, double within);

// Times `count` candidates on the null stream: run(i, n) queues n calls of candidate i. Each
// candidate is first called once (the first use of a function); one that throws there is left
// out (infinity), except candidate 0, whose error propagates. The sample length comes from one
// timed call of candidate 0. Returns each candidate's median milliseconds per call, from the
// runoff for the candidates it took.
std::vector<double> time_in_turns(const cuda::Context& context, size_t count,
                                  const std::function<void(size_t candidate, int calls)>& run,
                                  const TurnsOptions& options = {});

// "<name> (<library>): 0.0610 ms #7, 0.0690 ms #0, ...; kept #7": each candidate's time, fastest
// first (#i its index), and the one kept.
std::string turns_report(const std::string& name, const std::string& library, const std::vector<double>& ms, size_t kept);

}  // namespace coil
