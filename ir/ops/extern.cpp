// The extern op's registry record: inference asks the op registered under the node's name.
#include "ir/extern.h"
#include "ir/ops/registry.h"

namespace ember::ops {

namespace {

std::vector<TensorType> infer_extern(const OpInfo& op, std::span<const TensorType> in, const Attrs& attrs) {
  const std::string& name = attr_string(attrs, "name");
  for (const auto& [key, value] : attrs)
    if (attr_type(value) == AttrType::Shape)  // the text form could not tell it from ints
      EMBER_OP_ERROR(Type, op, "attribute '", key, "' of '", name, "': shapes are not accepted, pass ints");
  auto def = find_extern_op(name);
  if (!def) EMBER_OP_ERROR(Value, op, "no op is registered as '", name, "'");
  std::vector<TensorType> out = def->shape(in, attrs);
  if (out.empty()) EMBER_OP_ERROR(Value, op, "'", name, "' declares no outputs");
  return out;
}

}  // namespace

void register_extern(Table& table) {
  OpInfo& ext = table[static_cast<size_t>(Op::Extern)];
  ext.doc = "calls the host function registered as `name` (custom ops, ATen fallbacks); opaque to passes";
  ext.infer_multi = infer_extern;
  ext.attrs = {{"name", AttrType::String, std::nullopt}};
  ext.open_attributes = true;
}

}  // namespace ember::ops
