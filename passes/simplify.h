// simplify: algebraic identities as a rule table, one rule a line. Only exact identities: for
// floats x + -0.0 and x - +0.0 are, x + 0.0 and x - -0.0 are not (they turn -0.0 into +0.0). A rule applies only when its
// result has exactly the node's type, so no identity changes a dtype or a broadcast shape
// (x_int + 0.0 stays: its result is float). Leaves replaced nodes dead: run dce after it.
#pragma once
#include "passes/pass.h"
