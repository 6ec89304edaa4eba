// The extern op in the interpreter: the registered CPU function writes into the outputs.
#include <map>
#include <memory>
#include <mutex>

#include "runtime/extern_kernels.h"
#include "runtime/kernels/kernel.h"

namespace ember {

namespace {

struct Registry {
  std::mutex mutex;
  std::map<std::string, std::shared_ptr<const ExternCpuFn>, std::less<>> fns;
};

Registry& registry() {
  static Registry r;
  return r;
}

}  // namespace

void register_extern_kernel(const std::string& name, ExternCpuFn fn) {
  if (!fn) EMBER_THROW(Value, "[register_op] op '", name, "' needs a CPU implementation");
  Registry& r = registry();
  std::lock_guard<std::mutex> lock(r.mutex);
  r.fns[name] = std::make_shared<const ExternCpuFn>(std::move(fn));
}

const ExternCpuFn* find_extern_kernel(std::string_view name) {
  Registry& r = registry();
  std::lock_guard<std::mutex> lock(r.mutex);
  auto it = r.fns.find(name);
  return it == r.fns.end() ? nullptr : it->second.get();
}

namespace kernels {

namespace {

std::vector<Array> extern_call(const Call& call) {
  const std::string& name = attr_string(call.attrs, "name");
  const ExternCpuFn* fn = find_extern_kernel(name);
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
