// split-reductions: a float sum, mean, max or min over dims that no kernel folds at once (the
// batch dims of a bias gradient, a batch norm's (0, 2, 3), a sum without keepdim) becomes a chain
// of reductions that row and column kernels fold (passes/fuse.h: the last dim, or the one before
// it, with keepdim), between reshapes. Neighbouring dims that are both reduced or both kept merge
// first, so [N, C, H, W] over (0, 2, 3) is [N, C, H*W]: a row sum, then a column sum of [N, C].
// Sums and means of float16 and bfloat16 chain in float32 and round once, as one reduction does.
// Only while code generation is on (EMBER_CODEGEN=0: the interpreter folds any dims directly).
#pragma once
#include "passes/pass.h"
