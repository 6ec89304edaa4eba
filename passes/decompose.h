// decompose: replaces every node of an op with a decomposition (softmax, the norms, attention,
// mean/var/std/logsumexp, gelu, silu, linear, ...; see docs/ir.md) by the primitive nodes its
// registry record builds ([Note: decompositions] in ir/op.h), inserted where the node stands.
// A node whose decomposition declines a case stays. Afterwards only primitives remain, which is
// what code generators lower. Not in any mode: the interpreter runs composites directly and
// faster (EMBER_EXTRA_PASSES=decompose runs it after a mode's passes). Leaves the replaced nodes
// dead: run dce after it.
//
// decompose-fusible (every mode): only the composites whose decompositions fusion makes kernels
// of: softmax and log_softmax, the norms, batch norm (inference and training), var, var_mean and
// logsumexp, over any dims (split-reductions makes their reductions row and column reductions),
// std over the last dim with keepdim, attention as two matmuls around a row softmax (but see
// below). Nothing while code generation is off (EMBER_CODEGEN=0).
#pragma once
#include "passes/pass.h"
