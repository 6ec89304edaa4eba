// How one step of a plan runs where it has a choice that does not change what it computes: the
// threads it may use, and the library a GEMM goes to. max-autotune measures the choices and keeps
// the fastest (codegen/autotune.h); every other mode runs the defaults.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace ember {

// A choice a step leaves open, for max-autotune's search: its name and options, option 0 the
// default (a generated kernel's vector lanes, a GEMM's library, the threads).
struct Knob {
  std::string name;
  std::vector<int64_t> options;
  // A knob that means something only beside one option of another: its options past the default
  // are tried only where knob `only_with` takes the option of value `only_value` (a tile of
  // ember's own GEMM, only where the route is ember's own). Empty: always.
  std::string only_with = {};
  int64_t only_value = 0;
};

// Where a float32 GEMM goes. Auto: ember's rule (runtime/kernels/common.cpp, gemm_impl). Mkl:
// PyTorch's MKL, where the process has it (runtime/kernels/mkl.h; OpenBLAS where it has not).
// Generated: ember's own GEMM, a tile generated through MLIR ([Note: ember's own GEMM] in
// codegen/cpu/gemm.h; OpenBLAS in a build without the CPU code generator).
enum class GemmRoute : uint8_t { Auto, OneDnn, Blas, Mkl, Generated };

// A route's name in settings' text ("auto", "onednn", "blas", "mkl", "generated").
const char* route_name(GemmRoute route);

// The register tile of ember's own GEMM (GemmRoute::Generated): rows by columns of C, held in
// vector registers over the depth ([Note: ember's own GEMM] in codegen/cpu/gemm.h). 0 x 0: its
// default. Text: "12x32".
struct GemmTile {
  int rows = 0, cols = 0;
  bool is_default() const { return rows == 0 && cols == 0; }
  // Whether the tile can be generated: columns a multiple of 16 (one AVX-512 register of
  // float32), 2 to 32 accumulators (rows x columns / 16).
  bool valid() const;
  std::string str() const;
  // A knob's option for the tile, and back (rows << 16 | cols).
  int64_t option() const { return (int64_t{rows} << 16) | cols; }
  static GemmTile of_option(int64_t option) { return {static_cast<int>(option >> 16), static_cast<int>(option & 0xffff)}; }
  bool operator==(const GemmTile&) const = default;
};

// How a float32 convolution runs (runtime/kernels/contraction.cpp). Auto: oneDNN's direct JIT
// kernel where it has one (the order of sums eager's convolution has), ember's im2col and GEMM
// for pointwise ones. Brgemm: oneDNN's brgemm-based convolution (faster on some geometries, sums
// in another order). Im2col: ember's im2col and GEMM, through the step's GEMM route.
enum class ConvAlgorithm : uint8_t { Auto, Brgemm, Im2col };

// An algorithm's name in settings' text ("auto", "brgemm", "im2col").
const char* conv_name(ConvAlgorithm algorithm);

struct StepSettings {
  int threads = 0;  // at most this many threads, the caller included (0: as many as the call has)
  GemmRoute gemm = GemmRoute::Auto;  // a GEMM's library, or the one an attention's tiles use
  GemmTile tile;  // ember's own GEMM's tile, where `gemm` is GemmRoute::Generated
  ConvAlgorithm conv = ConvAlgorithm::Auto;  // a convolution's algorithm
  // Blocked attention's tiles (runtime/kernels/attention.h): queries and keys per tile (0: its own).
  int query_block = 0, key_block = 0;

  bool is_default() const { return *this == StepSettings{}; }
  std::string str() const;  // "threads=1 gemm=generated tile=12x32 query_block=32", or "default"
  // Parses str()'s text; throws ember::Error on anything else.
  static StepSettings parse(std::string_view text);
  // Whether `name` is one of str()'s fields.
  static bool is_field(std::string_view name);
  bool operator==(const StepSettings&) const = default;
};

// The fields of a choice's text, "name=value name=value" ("default": none), for the parsers of
// StepSettings and of a kernel's choices; an ember::Error naming `what` for a field without "=".
std::vector<std::pair<std::string, std::string>> choice_fields(std::string_view text, std::string_view what);
// A field's value as a positive integer; an ember::Error naming `what` otherwise.
int64_t positive_field(const std::string& name, const std::string& value, std::string_view what);

// While alive, the steps this thread runs follow `settings` (the thread limit through
// runtime/thread_pool.h's set_thread_limit).
class ScopedStepSettings {
 public:
  explicit ScopedStepSettings(const StepSettings& settings);
  ~ScopedStepSettings();
  ScopedStepSettings(const ScopedStepSettings&) = delete;
  ScopedStepSettings& operator=(const ScopedStepSettings&) = delete;

 private:
  StepSettings previous_;
  int previous_limit_;
};

// The settings of the step this thread is running (a step's own thread: the pool's threads
// see the defaults, so a kernel reads them before it splits its work).
const StepSettings& current_step_settings();
// Its GEMM route.
inline GemmRoute current_gemm_route() { return current_step_settings().gemm; }

}  // namespace ember
