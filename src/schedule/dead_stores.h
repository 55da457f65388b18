// Dead-store elimination: stores into temporaries that no later step reads are dropped (the
// mean and rstd of a layer_norm whose statistics nobody uses, say), and a loop kernel left
// with no stores is dropped. Extern calls always stay.
#pragma once
#include "loop/kernel.h"

namespace coil::schedule {

loop::Program drop_dead_stores(const loop::Program& program);

}  // namespace coil::schedule
