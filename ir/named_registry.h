// A thread-safe table from names to immutable entries, for what users register at run time
// (extern ops' shapes in ir/, their CPU kernels in runtime/). An entry that was found stays valid
// while held, even if another thread replaces it meanwhile.
#pragma once

#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>

namespace ember {

template <class T>
class NamedRegistry {
 public:
  void set(const std::string& name, T value) {
    auto entry = std::make_shared<const T>(std::move(value));
    std::lock_guard<std::mutex> lock(mutex_);
    entries_[name] = std::move(entry);
  }
  // The entry, or null.
  std::shared_ptr<const T> find(std::string_view name) const {
    std::lock_guard<std::mutex> lock(mutex_);
    auto it = entries_.find(name);
    return it == entries_.end() ? nullptr : it->second;
  }

 private:
  mutable std::mutex mutex_;
  std::map<std::string, std::shared_ptr<const T>, std::less<>> entries_;
};

}  // namespace ember
