// ember: a graph-capturing JIT compiler for tensor programs. The one public header.
//
//   #include <ember/ember.h>
//   auto f = ember::compile([](ember::Tensor x) { return ember::relu(x) * 2.0; });
//   ember::Tensor y = f(ember::uniform({4, 8}, /*seed=*/0));
#pragma once

#include "frontend/compile.h"
#include "frontend/custom_op.h"
#include "frontend/ops.h"
#include "frontend/report.h"
#include "frontend/tensor.h"
#include "ir/dtype.h"
#include "ir/error.h"
#include "ir/graph.h"
