// simplify: algebraic identities as a rule table, one rule a line. Only exact identities: x + 0
// is not one for floats (-0.0 + 0.0 = +0.0), x + -0.0 and x - 0 are. A rule applies only when its
// result has exactly the node's type, so no identity changes a dtype or a broadcast shape
// (x_int + 0.0 stays: its result is float). Leaves replaced nodes dead: run dce after it.
#pragma once
#include "passes/pass.h"
