// Fusion of a reduction with what follows it over the same rows: a pointwise kernel over
// (outer ++ inner) that reads the reduction's per-row result becomes an inner store of the
// reduction kernel (rms_norm, decomposed softmax's normalize), and a reduction over the same
// loop nest becomes a further reduction step (decomposed softmax's sum of exp). The per-row
// value is then a register instead of a buffer round trip; the buffer disappears when nothing
// else reads it. A pointwise consumer over a reshape of the producer's one outer dim ([8, 1024,
// 50257] after a reduction over [8192] rows) fuses too, its variables the row split back and
// its offsets simplified within the producer's (constant) bounds. A later pointwise kernel over
// a row kernel's elements that reads what the row kernel reads (and nothing written between
// them) moves into it as inner stores: the value a layer norm's row recomputes, stored by a
// kernel of its own for another reader.
#pragma once
#include "loop/kernel.h"

namespace coil::schedule {

loop::Program fuse_epilogues(const loop::Program& program);

}  // namespace coil::schedule
