// Fusion of a reduction with what follows it over the same rows: a pointwise kernel over
// (outer ++ inner) that reads the reduction's per-row result becomes an inner store of the
// reduction kernel (rms_norm, decomposed softmax's normalize), and a reduction over the same
// loop nest becomes a further reduction step (decomposed softmax's sum of exp). The per-row
// value is then a register instead of a buffer round trip; the buffer disappears when nothing
// else reads it.
#pragma once
#include "loop/kernel.h"

namespace coil::schedule {

loop::Program fuse_epilogues(const loop::Program& program);

}  // namespace coil::schedule
