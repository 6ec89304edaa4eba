// Extern ops: graph nodes that call a host function registered by name.
//
// [Note: extern ops]
// An `extern` node {name = "my_op"} stands for a call of the op registered as "my_op": custom ops
// from C++ (ember::register_op), and later the ATen ops the PyTorch bridge cannot lower yet. The IR
// knows an extern op by its shape function, which gives the output types (symbolic dims flow
// through it like any inference) and by whether it is pure. Its CPU implementation is registered
// with the runtime (runtime/extern_kernels.h). Passes treat an extern node as opaque: they never
// fold it or look inside; CSE merges only pure ones, and DCE keeps an impure one even when its
// results are unused, so its side effects happen on every call, in program order.
#pragma once

#include <functional>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "ir/op.h"

namespace ember {

struct Node;

// Output types from input types and the node's attributes. Throws ember::Error for bad inputs,
// with the message starting "[name]".
using ExternShapeFn = std::function<std::vector<TensorType>(std::span<const TensorType> inputs, const Attrs& attrs)>;

struct ExternOpDef {
  std::string name;
  ExternShapeFn shape;
  bool pure = true;  // no side effects: the same inputs give the same outputs
};

// Registers (or replaces) an extern op. Thread-safe. A Value error for an empty name or no shape
// function.
void register_extern_op(ExternOpDef def);
// The registered op, or null.
std::shared_ptr<const ExternOpDef> find_extern_op(std::string_view name);

// An extern node whose op is not pure, or is unknown (nothing can be assumed about it).
bool has_side_effects(const Node* n);

// [Note: nodes that must run]
// A node runs even when no output depends on it if it has side effects, or if it can raise an
// error on some data (integer division or remainder by zero, integers to negative powers,
// indices out of range): eager raises that error, so compiled code must too, even for a value
// the program then drops. DCE keeps such nodes and the tracer runs segments that hold them.
bool must_run(const Node* n);

}  // namespace ember
