// Internal: how the op families fill in their registry records. Each ir/ops/<family>.cpp defines
// one register_* function that sets the records of its ops.
#pragma once

#include <vector>

#include "ir/error.h"
#include "ir/op.h"

namespace ember::ops {

using Table = std::vector<OpInfo>;

void register_elementwise(Table& table);
void register_reductions(Table& table);
void register_contractions(Table& table);
void register_movement(Table& table);
void register_composites(Table& table);
void register_creation(Table& table);
void register_sorting(Table& table);
void register_extern(Table& table);

// "[op] message" errors of the given kind.
#define EMBER_OP_ERROR(kind, op, ...) EMBER_THROW(kind, "[", (op).name, "] ", __VA_ARGS__)

inline void check_rank(const OpInfo& op, const TensorType& t, size_t rank, const char* what) {
  if (t.shape.size() != rank)
    EMBER_OP_ERROR(Value, op, what, " must have rank ", rank, ", got ", t.str());
}

inline void check_floating(const OpInfo& op, const TensorType& t, const char* what) {
  if (!is_floating(t.dtype))
    EMBER_OP_ERROR(Type, op, what, " must be a floating-point tensor, got ", dtype_name(t.dtype));
}

}  // namespace ember::ops
