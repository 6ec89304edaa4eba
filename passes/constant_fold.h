// constant-fold: evaluates nodes whose inputs are all constants (and creation ops such as full
// and arange) with the reference interpreter, when the result is small (at most 64 elements) and
// static. An op that would raise at run time (integer division by zero) is left as it is, so the
// error still reaches the user when the graph runs. Leaves the folded nodes dead: run dce after.
#pragma once
#include "passes/pass.h"
