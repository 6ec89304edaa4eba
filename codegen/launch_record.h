// Launch records: a kernel's spec with the arguments and data of a launch, and what it computed,
// so that another backend can replay the launch and be checked against it. With
// EMBER_RECORD_LAUNCHES=<dir>, the first launch of each kernel spec (across every process using
// the directory) is written to <dir>/<spec hash>-0.launch. The tests record the CPU
// kernels of the op sweep and the fuzzers this way, and tests/unit/cuda_check.cpp replays each
// launch through the CUDA kernel of the same spec (emulated on the CPU).
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "codegen/kernel_args.h"

namespace ember::codegen {

struct LaunchRecord {
  std::string spec;             // the spec's text
  std::vector<int64_t> meta;    // kernel_args' meta
  struct Operand {
    DType dtype;
    std::string bytes;          // from element 0 to the last element the launch touches
  };
  std::vector<Operand> inputs, outputs;  // outputs: what the recorded backend wrote
};

// Where launches are recorded (EMBER_RECORD_LAUNCHES), or "" when they are not; read once.
const std::string& launch_record_dir();

// Whether this launch of `spec` is to be recorded (no record of the spec yet), before it runs.
bool wants_record(const KernelSpec& spec);

// A record of the inputs now (before the kernel may overwrite them in place).
LaunchRecord begin_record(const KernelSpec& spec, const std::vector<int64_t>& meta, std::span<const Array> inputs);
// Adds the outputs the launch wrote and stores the record; best effort, as the disk cache.
void finish_record(LaunchRecord& record, std::span<const Array> outputs);

// Every record in `dir` (unreadable ones are skipped and counted in `bad`).
std::vector<LaunchRecord> read_records(const std::string& dir, int* bad = nullptr);

// The bytes operand k of a launch reaches, from its element 0: 1 + sum((size - 1) * stride) elements.
int64_t operand_extent(const std::vector<int64_t>& meta, int rank, int k);

}  // namespace ember::codegen
