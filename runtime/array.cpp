#include "runtime/array.h"

#include "runtime/allocator.h"

#include <cstdlib>
#include <cstring>
#include <new>
#include <sstream>

#include "ir/error.h"
#include "runtime/element.h"
#include "runtime/kernels/kernel.h"

namespace ember {

namespace {
thread_local int64_t allocations = 0;
}  // namespace

int64_t storage_allocations() { return allocations; }

Storage::Storage(size_t n) : nbytes(n) {
  ++allocations;
  data = allocate(n);
}

Storage::Storage(void* external, size_t n, std::function<void()> release_fn)
    : data(external), nbytes(n), external_release_(std::move(release_fn)) {}

Storage::~Storage() {
  if (external_release_) external_release_();
  else release(data, nbytes);
}

std::vector<int64_t> Array::contiguous_strides(const std::vector<int64_t>& shape) {
  std::vector<int64_t> strides(shape.size());
  int64_t s = 1;
  for (size_t i = shape.size(); i-- > 0;) {
    strides[i] = s;
    s *= std::max<int64_t>(shape[i], 1);
  }
  return strides;
}

Array Array::empty(DType dtype, std::vector<int64_t> shape) {
  auto storage = std::make_shared<Storage>(checked_nbytes("empty", shape, dtype));
  auto strides = contiguous_strides(shape);
  return Array(dtype, std::move(shape), std::move(strides), 0, std::move(storage));
}

Array Array::zeros(DType dtype, std::vector<int64_t> shape) {
  Array a = empty(dtype, std::move(shape));
  std::memset(a.data(), 0, a.storage()->nbytes);
  return a;
}

Array::Array(DType dtype, std::vector<int64_t> shape, std::vector<int64_t> strides, int64_t offset,
             std::shared_ptr<Storage> storage)
    : dtype_(dtype), offset_(offset), storage_(std::move(storage)) {
  EMBER_CHECK(shape.size() == strides.size(), "shape and strides differ in rank");
  if (shape.empty()) return;  // the shared scalar geometry
  auto geometry = std::make_shared<Geometry>();
  for (int64_t d : shape) geometry->numel *= d;
  int64_t expected = 1;
  for (size_t i = shape.size(); i-- > 0;) {
    if (shape[i] == 1) continue;
    if (shape[i] == 0) break;  // no elements: contiguous
    if (strides[i] != expected) {
      geometry->contiguous = false;
      break;
    }
    expected *= shape[i];
  }
  geometry->shape = std::move(shape);
  geometry->strides = std::move(strides);
  geometry_ = std::move(geometry);
}

const std::shared_ptr<const Array::Geometry>& Array::scalar_geometry() {
  static const std::shared_ptr<const Geometry> scalar = std::make_shared<const Geometry>();
  return scalar;
}

void* Array::data() const {
  EMBER_CHECK(storage_ != nullptr, "undefined array");
  return static_cast<char*>(storage_->data) + offset_ * static_cast<int64_t>(itemsize(dtype_));
}

Array Array::with_storage(std::shared_ptr<Storage> storage) const {
  Array out = *this;
  out.storage_ = std::move(storage);
  return out;
}

Array Array::view(std::vector<int64_t> shape, std::vector<int64_t> strides, int64_t offset) const {
  return Array(dtype_, std::move(shape), std::move(strides), offset, storage_);
}

int64_t strided_offset(int64_t linear, const std::vector<int64_t>& shape, const std::vector<int64_t>& strides) {
  int64_t off = 0;
  for (size_t i = shape.size(); i-- > 0;) {
    if (shape[i] == 0) return 0;
    off += (linear % shape[i]) * strides[i];
    linear /= shape[i];
  }
  return off;
}

Array Array::contiguous() const {
  if (is_contiguous()) return *this;
  Array out = empty(dtype_, shape());
  kernels::copy_into(*this, out);  // row by row, not an index computation per element
  return out;
}

double Array::get(int64_t i) const {
  const char* base = static_cast<const char*>(storage_->data);
  return element::load<double>(base + (offset_ + strided_offset(i, shape(), strides())) * itemsize(dtype_), dtype_);
}

int64_t Array::get_int(int64_t i) const {
  const char* base = static_cast<const char*>(storage_->data);
  return element::load<int64_t>(base + (offset_ + strided_offset(i, shape(), strides())) * itemsize(dtype_), dtype_);
}

std::string Array::str(int64_t max_elements) const {
  std::ostringstream out;
  out << dtype_name(dtype_) << "[";
  for (size_t i = 0; i < shape().size(); ++i) out << (i ? ", " : "") << shape()[i];
  out << "] [";
  int64_t n = numel();
  for (int64_t i = 0; i < n && i < max_elements; ++i) {
    if (i) out << ", ";
    if (is_floating(dtype_)) out << get(i);
    else if (dtype_ == DType::Bool) out << (get_int(i) ? "true" : "false");
    else out << get_int(i);
  }
  if (n > max_elements) out << ", ...";
  out << "]";
  return out.str();
}

}  // namespace ember
