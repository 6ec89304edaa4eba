#include "codegen/cpu/jit.h"

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <mutex>
#include <unordered_map>

#include "llvm/ExecutionEngine/Orc/ExecutionUtils.h"
#include "llvm/ExecutionEngine/Orc/JITTargetMachineBuilder.h"
#include "llvm/ExecutionEngine/Orc/LLJIT.h"
#include "llvm/Config/llvm-config.h"
#include "llvm/IR/LegacyPassManager.h"
#include "llvm/IR/Module.h"
#include "llvm/MC/TargetRegistry.h"
#include "llvm/Object/ELFObjectFile.h"
#include "llvm/Passes/PassBuilder.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/TargetSelect.h"
#include "llvm/Support/raw_ostream.h"
#include "llvm/Target/TargetMachine.h"
#include "llvm/TargetParser/Host.h"
#include "mlir/Conversion/MathToLibm/MathToLibm.h"
#include "mlir/Conversion/Passes.h"
#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/ControlFlow/IR/ControlFlow.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/Math/Transforms/Passes.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/Parser/Parser.h"
#include "mlir/Pass/PassManager.h"
#include "mlir/Pass/PassRegistry.h"
#include "mlir/Target/LLVMIR/Dialect/Builtin/BuiltinToLLVMIRTranslation.h"
#include "mlir/Target/LLVMIR/Dialect/LLVMIR/LLVMToLLVMIRTranslation.h"
#include "mlir/Target/LLVMIR/Export.h"
#include "mlir/Transforms/GreedyPatternRewriteDriver.h"
#include "runtime/config.h"

namespace ember::codegen::cpu {

namespace {

// The lowering after polynomial approximation. Math ops that LLVM has no accurate lowering for
// (tan, tanh, erf, log1p and expm1 in f64) become libm calls; the rest become LLVM intrinsics.
// Horizontal folds of a vector's lanes (vector.reduction) are reassociated: LLVM otherwise adds
// the lanes one by one, a chain of 16 dependent adds for a float32 register (64 for an unrolled
// accumulator), which cost a row sum of 256 floats more than its loads. The reduction semantics
// allow any tree ([Note: reduction semantics], ir/reduction.h).
// (The PassManager is anchored on the module: no builtin.module(...) around this.)
constexpr const char* kLowering =
    "convert-scf-to-cf,convert-math-to-llvm{approximate-log1p=false},convert-math-to-libm,"
    "convert-vector-to-llvm{reassociate-fp-reductions},convert-arith-to-llvm,convert-func-to-llvm,convert-cf-to-llvm,"
    "reconcile-unrealized-casts";

std::once_flag initialised;

void initialise() {
  std::call_once(initialised, [] {
    llvm::InitializeNativeTarget();
    llvm::InitializeNativeTargetAsmPrinter();
    llvm::InitializeNativeTargetAsmParser();
    mlir::registerConversionPasses();
  });
}

// One target machine per thread: creating one costs milliseconds, and one is not thread-safe.
llvm::TargetMachine& host_machine() {
  thread_local std::unique_ptr<llvm::TargetMachine> machine;
  if (machine) return *machine;
  auto builder = llvm::orc::JITTargetMachineBuilder::detectHost();
  if (!builder) throw CodegenError("emit", llvm::toString(builder.takeError()));
  builder->setCodeGenOptLevel(llvm::CodeGenOptLevel::Aggressive);
  // A JIT target defaults to the large code model, which loads every constant's address with a
  // 64-bit move: in a kernel of many constants (exp's polynomial) those addresses crowd the
  // registers and the loop spends more instructions shuffling them than computing. JITLink places
  // an object's sections together, so 32-bit PC-relative addressing reaches them.
  builder->setCodeModel(llvm::CodeModel::Small);
  auto created = builder->createTargetMachine();
  if (!created) throw CodegenError("emit", llvm::toString(created.takeError()));
  machine = std::move(*created);
  return *machine;
}

// Collects MLIR's diagnostics, so a failure says what went wrong.
class Diagnostics {
 public:
  explicit Diagnostics(mlir::MLIRContext& ctx)
      : handler_(ctx.getDiagEngine().registerHandler([this](mlir::Diagnostic& d) {
          text_ += d.str() + "\n";
          return mlir::success();
        })),
        ctx_(ctx) {}
  ~Diagnostics() { ctx_.getDiagEngine().eraseHandler(handler_); }
  const std::string& text() const { return text_; }

 private:
  mlir::DiagnosticEngine::HandlerID handler_;
  mlir::MLIRContext& ctx_;
  std::string text_;
};

void load_dialects(mlir::MLIRContext& ctx) {
  mlir::DialectRegistry registry;
  registry.insert<mlir::arith::ArithDialect, mlir::cf::ControlFlowDialect, mlir::func::FuncDialect,
                  mlir::LLVM::LLVMDialect, mlir::math::MathDialect, mlir::scf::SCFDialect,
                  mlir::vector::VectorDialect>();
  mlir::registerBuiltinDialectTranslation(registry);
  mlir::registerLLVMDialectTranslation(registry);
  ctx.appendDialectRegistry(registry);
  ctx.loadAllAvailableDialects();
}

// One MLIR context per thread, its dialects loaded once (a context is not thread-safe to share
// while parsing, and loading the dialects costs milliseconds). Each kernel's module is destroyed
// after use; what stays in the context are uniqued types and attributes, which are few.
mlir::MLIRContext& context() {
  thread_local std::unique_ptr<mlir::MLIRContext> ctx;
  if (!ctx) {
    ctx = std::make_unique<mlir::MLIRContext>(mlir::MLIRContext::Threading::DISABLED);
    load_dialects(*ctx);
  }
  return *ctx;
}

void lower(mlir::MLIRContext& ctx, mlir::ModuleOp module, const Diagnostics& diags) {
  mlir::RewritePatternSet patterns(&ctx);
  mlir::populateMathPolynomialApproximationPatterns(patterns);
  // Not sin and cos: their approximation reduces the argument in f32 and loses everything past
  // |x| ~ 1e5 (sin(1.5e9) came out as 0); libm reduces exactly.
  auto& native = patterns.getNativePatterns();
  native.erase(std::remove_if(native.begin(), native.end(),
                              [](const std::unique_ptr<mlir::RewritePattern>& p) {
                                auto root = p->getRootKind();
                                return root && (root->getStringRef() == "math.sin" || root->getStringRef() == "math.cos");
                              }),
               native.end());
  if (mlir::failed(mlir::applyPatternsAndFoldGreedily(module, std::move(patterns))))
    throw CodegenError("lower", "polynomial approximation did not converge\n" + diags.text());
  mlir::PassManager pm(&ctx);
  if (mlir::failed(mlir::parsePassPipeline(kLowering, pm)))
    throw CodegenError("lower", "bad pass pipeline\n" + diags.text());
  if (mlir::failed(pm.run(module))) throw CodegenError("lower", diags.text());
}

// LLVM's O2 without its loop vectorisers and unrolling: the kernel's vector loop is written by
// hand, and its scalar loop handles the tail or strided data, which neither would speed up; they
// would only add code for the instruction selector to chew through.
void optimise(llvm::Module& module, llvm::TargetMachine& machine) {
  llvm::PipelineTuningOptions tuning;
  tuning.LoopVectorization = false;
  tuning.SLPVectorization = false;
  tuning.LoopUnrolling = false;
  llvm::PassBuilder builder(&machine, tuning);
  llvm::LoopAnalysisManager loops;
  llvm::FunctionAnalysisManager functions;
  llvm::CGSCCAnalysisManager cgscc;
  llvm::ModuleAnalysisManager modules;
  builder.registerModuleAnalyses(modules);
  builder.registerCGSCCAnalyses(cgscc);
  builder.registerFunctionAnalyses(functions);
  builder.registerLoopAnalyses(loops);
  builder.crossRegisterProxies(loops, functions, cgscc, modules);
  builder.buildPerModuleDefaultPipeline(llvm::OptimizationLevel::O2).run(module, modules);
}

std::string emit(llvm::TargetMachine& machine, llvm::Module& module, llvm::CodeGenFileType type) {
  llvm::SmallVector<char, 0> buffer;
  llvm::raw_svector_ostream out(buffer);
  llvm::legacy::PassManager pm;
  if (machine.addPassesToEmitFile(pm, out, nullptr, type))
    throw CodegenError("emit", "the target cannot emit this file type");
  pm.run(module);
  return std::string(buffer.begin(), buffer.end());
}

std::string text_of(mlir::Operation* op) {
  std::string s;
  llvm::raw_string_ostream out(s);
  op->print(out);
  return s;
}

std::string text_of(const llvm::Module& module) {
  std::string s;
  llvm::raw_string_ostream out(s);
  module.print(out, nullptr);
  return s;
}

}  // namespace

const std::string& host_target() {
  static const std::string target = [] {
    initialise();
    std::string t = llvm::sys::getProcessTriple() + " " + llvm::sys::getHostCPUName().str();
    for (const auto& feature : llvm::sys::getHostCPUFeatures())
      if (feature.second) t += " +" + feature.first().str();
    return t;
  }();
  return target;
}

const char* llvm_version() { return LLVM_VERSION_STRING; }

bool jit_available() { return true; }

std::string compile_object(const std::string& mlir_text, Stages* stages) {
  initialise();
  auto last = std::chrono::steady_clock::now();
  auto lap = [&](const char* stage) {
    auto now = std::chrono::steady_clock::now();
    if (stages) stages->ms.emplace_back(stage, std::chrono::duration<double, std::milli>(now - last).count());
    last = now;
  };
  mlir::MLIRContext& ctx = context();
  Diagnostics diags(ctx);
  mlir::OwningOpRef<mlir::ModuleOp> module = mlir::parseSourceString<mlir::ModuleOp>(mlir_text, &ctx);
  if (!module) throw CodegenError("parse", diags.text());
  lap("parse");
  lower(ctx, *module, diags);
  if (stages && stages->keep) stages->mlir_lowered = text_of(module->getOperation());
  lap("lower");

  llvm::LLVMContext llvm_ctx;
  std::unique_ptr<llvm::Module> ir = mlir::translateModuleToLLVMIR(*module, llvm_ctx);
  if (!ir) throw CodegenError("translate", diags.text());
  lap("translate");
  llvm::TargetMachine& machine = host_machine();
  ir->setDataLayout(machine.createDataLayout());
  ir->setTargetTriple(machine.getTargetTriple().str());
  optimise(*ir, machine);
  lap("optimise");
  if (stages && stages->keep) {
    stages->llvm_ir = text_of(*ir);
    stages->assembly = emit(machine, *ir, llvm::CodeGenFileType::AssemblyFile);
  }
  std::string object = emit(machine, *ir, llvm::CodeGenFileType::ObjectFile);
  lap("codegen");
  return object;
}

namespace {

// The size of function `name` in an object file, 0 if not found.
uint64_t symbol_size(const std::string& object, const std::string& name) {
  auto file = llvm::object::ObjectFile::createObjectFile(llvm::MemoryBufferRef(object, name));
  if (!file) {
    llvm::consumeError(file.takeError());
    return 0;
  }
  for (const llvm::object::SymbolRef& symbol : (*file)->symbols()) {
    auto symbol_name = symbol.getName();
    if (!symbol_name) {
      llvm::consumeError(symbol_name.takeError());
      continue;
    }
    if (*symbol_name == name) return llvm::object::ELFSymbolRef(symbol).getSize();
  }
  return 0;
}

// With EMBER_PERF_MAP=1, each loaded kernel's address range and name go to /tmp/perf-<pid>.map,
// where `perf report` looks for the names of JIT code: a profile then shows ember_k_<hash> (its
// KernelSpec under EMBER_DUMP_AFTER=kernel-spec) instead of an anonymous [JIT] address.
void add_to_perf_map(KernelFn fn, const std::string& object, const std::string& name) {
  static const bool on = config::get("EMBER_PERF_MAP") == "1";
  if (!on) return;
  static FILE* map = std::fopen(("/tmp/perf-" + std::to_string(getpid()) + ".map").c_str(), "a");
  if (!map) return;
  std::fprintf(map, "%lx %lx %s\n", reinterpret_cast<unsigned long>(fn),
               static_cast<unsigned long>(symbol_size(object, name)), name.c_str());
  std::fflush(map);
}

}  // namespace

KernelFn load_kernel(const std::string& object, const std::string& name) {
  initialise();
  static std::mutex mu;
  static std::unique_ptr<llvm::orc::LLJIT> jit;
  static std::unordered_map<std::string, KernelFn> loaded;
  std::lock_guard<std::mutex> lock(mu);
  if (auto it = loaded.find(name); it != loaded.end()) return it->second;
  if (!jit) {
    auto created = llvm::orc::LLJITBuilder().create();
    if (!created) throw CodegenError("load", llvm::toString(created.takeError()));
    jit = std::move(*created);
    const llvm::DataLayout& layout = jit->getDataLayout();
    auto process = llvm::orc::DynamicLibrarySearchGenerator::GetForCurrentProcess(layout.getGlobalPrefix());
    if (!process) throw CodegenError("load", llvm::toString(process.takeError()));
    jit->getMainJITDylib().addGenerator(std::move(*process));
  }
  auto buffer = llvm::MemoryBuffer::getMemBufferCopy(object, name);
  if (llvm::Error e = jit->addObjectFile(std::move(buffer))) throw CodegenError("load", llvm::toString(std::move(e)));
  auto address = jit->lookup(name);
  if (!address) throw CodegenError("load", llvm::toString(address.takeError()));
  KernelFn fn = address->toPtr<KernelFn>();
  loaded.emplace(name, fn);
  add_to_perf_map(fn, object, name);
  return fn;
}

}  // namespace ember::codegen::cpu
