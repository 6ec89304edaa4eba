// An eager value on the CPU: a strided view of a shared storage. Views (reshape, permute, slice,
// expand, ...) share storage with their source; nothing in ember mutates an array after it has
// been produced, so sharing is never observable.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "ir/dtype.h"

namespace ember {

// Storages allocated by this thread so far: what a plan's allocations per call are counted with.
int64_t storage_allocations();

struct Storage {
  explicit Storage(size_t nbytes);
  // Memory owned elsewhere (a PyTorch or NumPy tensor shared through DLPack): `release` runs
  // when the last array viewing it is gone, instead of freeing `data`.
  Storage(void* data, size_t nbytes, std::function<void()> release);
  ~Storage();
  Storage(const Storage&) = delete;
  Storage& operator=(const Storage&) = delete;
  void* data = nullptr;
  size_t nbytes = 0;

 private:
  std::function<void()> external_release_;  // set for memory owned elsewhere
};

class Array {
 public:
  Array() = default;
  // A new contiguous array (64-byte aligned, uninitialised).
  static Array empty(DType dtype, std::vector<int64_t> shape);
  static Array zeros(DType dtype, std::vector<int64_t> shape);
  static std::vector<int64_t> contiguous_strides(const std::vector<int64_t>& shape);

  // A view of `storage` with explicit strides and offset (in elements).
  Array(DType dtype, std::vector<int64_t> shape, std::vector<int64_t> strides, int64_t offset,
        std::shared_ptr<Storage> storage);

  DType dtype() const { return dtype_; }
  const std::vector<int64_t>& shape() const { return geometry_->shape; }
  const std::vector<int64_t>& strides() const { return geometry_->strides; }
  int64_t offset() const { return offset_; }
  int64_t rank() const { return static_cast<int64_t>(geometry_->shape.size()); }
  int64_t numel() const { return geometry_->numel; }
  bool defined() const { return storage_ != nullptr; }
  bool is_contiguous() const { return geometry_->contiguous; }
  const std::shared_ptr<Storage>& storage() const { return storage_; }

  // Address of the first element (storage base + offset).
  void* data() const;
  template <class T>
  T* data_as() const { return static_cast<T*>(data()); }

  // This array's dtype, shape, strides and offset over `storage`: the geometry is shared, not
  // copied ([Note: shared geometry]), so a plan binds a destination without allocating.
  Array with_storage(std::shared_ptr<Storage> storage) const;
  // A view with new shape/strides over the same storage and offset.
  Array view(std::vector<int64_t> shape, std::vector<int64_t> strides, int64_t offset) const;
  // This array if contiguous, else a contiguous copy.
  Array contiguous() const;
  // Element i in row-major order, converted to double (tests and printing).
  double get(int64_t i) const;
  // Element i in row-major order as int64 (exact for integer dtypes).
  int64_t get_int(int64_t i) const;

  std::string str(int64_t max_elements = 16) const;  // "f32[2, 2] [1, 2, 3, 4]"

 private:
  // [Note: shared geometry] Shape and strides never change after construction, so copies of an
  // array share them: a plan's call copies arrays into its slots, its steps' arguments and its
  // outputs, and each copy used to copy two vectors (two allocations and two frees; a third of
  // a 1-element call's time went to malloc and free).
  struct Geometry {
    std::vector<int64_t> shape, strides;
    int64_t numel = 1;
    bool contiguous = true;
  };
  static const std::shared_ptr<const Geometry>& scalar_geometry();  // rank 0, shared by all
  DType dtype_ = DType::Float32;
  std::shared_ptr<const Geometry> geometry_ = scalar_geometry();
  int64_t offset_ = 0;
  std::shared_ptr<Storage> storage_;
};

// Row-major linear index -> storage offset (in elements) under `strides`.
int64_t strided_offset(int64_t linear, const std::vector<int64_t>& shape, const std::vector<int64_t>& strides);

}  // namespace ember
