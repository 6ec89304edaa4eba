// cse: common-subexpression elimination. Two nodes with the same op, inputs, attributes and type
// compute the same value (every op is pure, random ops included: they are keyed by their seed),
// so later ones are replaced by the first. Leaves the duplicates dead: run dce after it.
#pragma once
#include "passes/pass.h"
