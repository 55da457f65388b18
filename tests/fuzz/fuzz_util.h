// What every libFuzzer target here holds a reader of outside data to: bad input is refused with a
// coil::Error, a message written for the user. Anything else is a finding, and ends the run with
// the input saved: a crash, a sanitizer report, a leak, any other exception (it escapes
// LLVMFuzzerTestOneInput and terminates), and an internal check failing (COIL_CHECK aborts in
// these builds: src/support/error.cc), the input having reached a state the code assumed
// impossible.
#pragma once
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <string_view>

#include "coil/error.h"
#include "coil/graph.h"
#include "coil/tensor.h"

namespace coil::fuzz {

// Ends the run as a crash, so libFuzzer saves the input under the artifact prefix.
[[noreturn]] inline void finding(std::string_view what, std::string_view detail) {
  std::fprintf(stderr, "\n==== fuzz finding: %.*s\n%.*s\n", static_cast<int>(what.size()), what.data(),
               static_cast<int>(detail.size()), detail.data());
  std::abort();
}

// Runs `read`; true when it returned, false when it refused the input with a coil::Error.
template <typename Read>
bool accepted(Read&& read) {
  try {
    read();
    return true;
  } catch (const Error&) {
    return false;
  }
}

// What a reader accepted must also go through the checks after it: a coil::Error there is a
// finding too (the reader let through something the rest of coil cannot take).
template <typename Check>
void must_pass(std::string_view what, Check&& check) {
  try {
    check();
  } catch (const Error& e) {
    finding(what, e.what());
  }
}

// The same dtype, sizes and bytes (a reader's output written out and read back).
inline bool same_tensor(const Tensor& a, const Tensor& b) {
  if (a.dtype() != b.dtype() || a.sizes() != b.sizes()) return false;
  const size_t bytes = static_cast<size_t>(a.numel() * dtype_size(a.dtype()));
  return bytes == 0 || std::memcmp(a.data(), b.data(), bytes) == 0;
}

// A graph a reader accepted passes the verifier, and its text form reads back as itself
// (packages store graphs as text; `coil check` and COIL_DEBUG=graph print them).
inline void check_graph(const Graph& graph) {
  must_pass("an accepted graph fails the verifier", [&] { verify(graph); });
  const std::string printed = print_graph(graph);
  std::string reprinted;
  must_pass("the printed graph does not parse", [&] { reprinted = print_graph(parse_graph(printed, "printed.coil")); });
  if (reprinted != printed) finding("print -> parse -> print is not a fixed point", printed + "\n---- printed again:\n" + reprinted);
}

}  // namespace coil::fuzz
