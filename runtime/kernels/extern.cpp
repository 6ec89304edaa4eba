// The extern op in the interpreter: the registered CPU function writes into the outputs.
#include "ir/named_registry.h"
#include "runtime/extern_kernels.h"
#include "runtime/kernels/kernel.h"

namespace ember {

namespace {

NamedRegistry<ExternCpuFn>& registry() {
  static NamedRegistry<ExternCpuFn> r;
  return r;
}

}  // namespace

void register_extern_kernel(const std::string& name, ExternCpuFn fn) {
  if (!fn) EMBER_THROW(Value, "[register_op] op '", name, "' needs a CPU implementation");
  registry().set(name, std::move(fn));
}

std::shared_ptr<const ExternCpuFn> find_extern_kernel(std::string_view name) { return registry().find(name); }

namespace kernels {

namespace {

std::vector<Array> extern_call(const Call& call) {
  const std::string& name = attr_string(call.attrs, "name");
  auto fn = find_extern_kernel(name);
  if (!fn) EMBER_THROW(NotImplemented, "[extern] '", name, "' has no CPU implementation registered");
  std::vector<Array> outputs;
  for (size_t k = 0; k < call.shapes.size(); ++k) outputs.push_back(output(call, k));
  (*fn)(call.inputs, outputs, call.attrs);
  return outputs;
}

}  // namespace

void register_extern(MultiKernelTable& t) { t[static_cast<size_t>(Op::Extern)] = extern_call; }

}  // namespace kernels

}  // namespace ember
