#include "frontend/custom_op.h"

#include "frontend/trace.h"
#include "ir/error.h"

namespace ember {

void register_op(CustomOp op) {
  if (op.name.empty()) EMBER_THROW(Value, "[register_op] the op needs a name");
  if (!op.shape) EMBER_THROW(Value, "[register_op] op '", op.name, "' needs a shape function");
  if (!op.cpu) EMBER_THROW(Value, "[register_op] op '", op.name, "' needs a CPU implementation");
  register_extern_kernel(op.name, std::move(op.cpu));
  register_extern_op({op.name, std::move(op.shape), op.pure});
}

std::vector<Tensor> call_op(const std::string& name, const std::vector<Tensor>& inputs, Attrs attrs) {
  if (attrs.count("name")) EMBER_THROW(Value, "[", name, "] 'name' is not an attribute an op can take");
  attrs["name"] = name;
  return apply_multi(Op::Extern, inputs, std::move(attrs));
}

}  // namespace ember
