// decompose: replaces every node of an op with a decomposition (softmax, the norms, attention,
// mean/var/std/logsumexp, gelu, silu, linear, ...; see docs/ir.md) by the primitive nodes its
// registry record builds ([Note: decompositions] in ir/op.h), inserted where the node stands.
// A node whose decomposition declines a case stays. Afterwards only primitives remain, which is
// what code generators lower. Not in any mode: the interpreter runs composites directly and
// faster (EMBER_EXTRA_PASSES=decompose runs it after a mode's passes). Leaves the replaced nodes
// dead: run dce after it.
//
// decompose-rows (every mode): only the composites whose decomposition reduces along the last dim
// alone (softmax and log_softmax over it, the norms over one dim, inference batch norm, var, std
// and logsumexp over it with keepdim, attention: two matmuls around a softmax), which fusion
// then makes one row kernel each; nothing while code generation is off (EMBER_CODEGEN=0).
#pragma once
#include "passes/pass.h"
