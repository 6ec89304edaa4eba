#include "plan_call.h"

#include <optional>

#include "ir/error.h"
#include "runtime/thread_pool.h"

namespace py = pybind11;

namespace ember::python {

namespace {

// torch.get_num_threads(), read at each call: compiled code runs on as many threads as eager
// would, and the user may change it between calls. 0 (ember's own setting) without PyTorch.
int torch_threads() {
  // torch.get_num_threads once PyTorch is loaded, kept for good (the GIL guards it).
  static PyObject* get = nullptr;
  if (!get) {
    py::object torch = py::module_::import("sys").attr("modules").attr("get")("torch");
    if (torch.is_none()) return 0;
    get = py::object(torch.attr("get_num_threads")).release().ptr();
  }
  return py::handle(get)().cast<int>();
}

}  // namespace

void check_input(size_t i, const TensorType& t, const Array& a, const SymbolValues& symbols) {
  if (a.dtype() != t.dtype)
    EMBER_THROW(Type, "[run] input ", i, " is ", dtype_name(a.dtype()), ", the graph takes ", t.str());
  std::vector<int64_t> shape = evaluate(t.shape, symbols);
  if (a.shape() != shape)
    EMBER_THROW(Value, "[run] input ", i, " has shape ", shape_str(to_shape(a.shape())), ", the graph takes ",
                shape_str(to_shape(shape)), " (", t.str(), ")");
}

std::vector<Array> run_plan(const GraphPlan& plan, const std::vector<Array>& arrays, const SymbolValues& symbols,
                            const OutputStorages& storages) {
  int threads = torch_threads();
  py::gil_scoped_release no_gil;
  std::optional<ThreadCountForCall> count;
  if (threads > 0) count.emplace(threads);
  return plan.run(arrays, symbols, nullptr, storages);  // max-autotune: a new bucket's first call tunes
}

std::vector<std::shared_ptr<Storage>> bind_given(const GivenBuffers& given, const std::vector<OutputBuffer>& buffers,
                                                 std::vector<GivenOutput>& given_outputs) {
  if (given.arrays.size() != buffers.size())
    EMBER_THROW(Value, "[run] output_storages gave ", given.arrays.size(), " buffers, the plan has ", buffers.size());
  std::vector<std::shared_ptr<Storage>> out;
  for (size_t i = 0; i < buffers.size(); ++i) {
    const Array& a = given.arrays[i];
    const OutputBuffer& b = buffers[i];
    if (b.output < 0 || a.dtype() != b.dtype || a.shape() != b.shape || !a.is_contiguous() || a.data() != a.storage()->data)
      EMBER_THROW(Value, "[run] output_storages gave a tensor other than output buffer ", i, " asks for");
    given_outputs.push_back({b.output, a.storage().get(), a.data(), given.tensors[i]});
    out.push_back(a.storage());
  }
  return out;
}

py::handle given_tensor(const std::vector<GivenOutput>& given_outputs, size_t k, const Array& output) {
  if (!output.is_contiguous()) return py::handle();  // the caller's tensor is contiguous
  for (const GivenOutput& g : given_outputs)
    if (g.output == static_cast<int>(k) && g.storage == output.storage().get() && g.data == output.data()) return g.tensor;
  return py::handle();
}

}  // namespace ember::python
