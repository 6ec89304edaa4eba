// The choices a generated CPU kernel leaves open, which max-autotune measures (codegen/autotune.h).
// Each field at 0 takes the default, so KernelConfig{} is the kernel every other mode runs.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

namespace ember::codegen::cpu {

struct KernelConfig {
  // Emitted into the code (part of the kernel's cache key):
  int lanes = 0;           // elements per step of the vector loops; default: one register's worth
  int fold_block = 0;      // steps a reduction folds before adding to the running total (256)
  int column_vectors = 0;  // vectors of columns per step of a column kernel (4)
  // Read at launch:
  int64_t grain = 0;   // elements a thread's share holds at least (32768)
  int whole_rows = 0;  // 1: rows fewer than the threads stay whole ([Note: split row reductions])

  bool is_default() const { return *this == KernelConfig{}; }
  // Whether a field read at launch is set (a config that differs only in those shares the code).
  bool sets_launch() const { return grain != 0 || whole_rows != 0; }
  // What changes the emitted code: "lanes=32 fold_block=64", "" for the default code.
  std::string code_str() const;
  // Every field that is set: "lanes=32 grain=8192 whole_rows=1", or "default".
  std::string str() const;
  // Parses str()'s text; throws ember::Error on anything else.
  static KernelConfig parse(std::string_view text);
  bool operator==(const KernelConfig&) const = default;
};

}  // namespace ember::codegen::cpu
