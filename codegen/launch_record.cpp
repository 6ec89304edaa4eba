#include "codegen/launch_record.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <fstream>
#include <mutex>
#include <set>
#include <sstream>

#include "runtime/config.h"

namespace ember::codegen {

namespace {

constexpr char kMagic[] = "EMBERLAUNCH1\n";
// A launch larger than this is not recorded: its replay would be too slow to emulate (a sum
// over 2^31 broadcast elements holds a few bytes and takes hours).
constexpr int64_t kMaxBytes = int64_t{4} << 20;
constexpr int64_t kMaxElements = int64_t{1} << 22;
constexpr int kRecordsPerSpec = 1;

void put_i64(std::string& out, int64_t v) { out.append(reinterpret_cast<const char*>(&v), 8); }
void put_bytes(std::string& out, const std::string& b) {
  put_i64(out, static_cast<int64_t>(b.size()));
  out += b;
}

class Reader {
 public:
  explicit Reader(const std::string& data) : data_(data) {}
  bool ok() const { return ok_; }
  int64_t i64() {
    int64_t v = 0;
    if (at_ + 8 > data_.size()) return fail();
    std::memcpy(&v, data_.data() + at_, 8);
    at_ += 8;
    return v;
  }
  std::string bytes() {
    int64_t n = i64();
    if (!ok_ || n < 0 || at_ + static_cast<size_t>(n) > data_.size()) return fail(), std::string();
    std::string b = data_.substr(at_, static_cast<size_t>(n));
    at_ += static_cast<size_t>(n);
    return b;
  }

 private:
  int64_t fail() {
    ok_ = false;
    return 0;
  }
  const std::string& data_;
  size_t at_ = sizeof kMagic - 1;
  bool ok_ = true;
};

std::string bytes_of(const void* data, int64_t elements, DType dtype) {
  return std::string(static_cast<const char*>(data), static_cast<size_t>(elements) * itemsize(dtype));
}

// The bytes of `array` a launch reaches: none of an empty array, whatever its strides say.
int64_t extent_of(const Array& array, const std::vector<int64_t>& meta, int rank, int k) {
  return array.numel() == 0 ? 0 : operand_extent(meta, rank, k);
}

}  // namespace

const std::string& launch_record_dir() {
  static const std::string dir = config::get("EMBER_RECORD_LAUNCHES");
  return dir;
}

int64_t operand_extent(const std::vector<int64_t>& meta, int rank, int k) {
  int64_t extent = 1;
  for (int d = 0; d < rank; ++d) {
    int64_t stride = meta[rank * (1 + k) + d];
    // An empty dim empties the operand, unless the operand does not walk it: a reduction's
    // output (stride 0 along the reduced dim) holds one value per row even when rows are empty.
    if (meta[d] == 0 && stride != 0) return 0;
    extent += std::max<int64_t>(meta[d] - 1, 0) * stride;
  }
  return extent;
}

bool wants_record(const KernelSpec& spec) {
  if (launch_record_dir().empty()) return false;
  static std::mutex mu;
  static std::set<std::string> done;  // specs found recorded
  std::lock_guard<std::mutex> lock(mu);
  std::string hash = spec.hash();
  if (done.count(hash)) return false;
  struct stat st;
  for (int n = 0; n < kRecordsPerSpec; ++n)
    if (stat((launch_record_dir() + "/" + hash + "-" + std::to_string(n) + ".launch").c_str(), &st) != 0) return true;
  done.insert(hash);
  return false;
}

LaunchRecord begin_record(const KernelSpec& spec, const std::vector<int64_t>& meta, std::span<const Array> inputs) {
  LaunchRecord r;
  r.spec = spec.str();
  r.meta = meta;
  for (size_t k = 0; k < inputs.size(); ++k)
    r.inputs.push_back({inputs[k].dtype(), bytes_of(inputs[k].data(), extent_of(inputs[k], meta, spec.rank, static_cast<int>(k)),
                                                   inputs[k].dtype())});
  return r;
}

void finish_record(LaunchRecord& r, std::span<const Array> outputs) {
  KernelSpec spec = parse_kernel_spec(r.spec);
  int64_t total = 0;
  for (size_t o = 0; o < outputs.size(); ++o) {
    int k = static_cast<int>(spec.inputs.size() + o);
    r.outputs.push_back({outputs[o].dtype(), bytes_of(outputs[o].data(), extent_of(outputs[o], r.meta, spec.rank, k),
                                                     outputs[o].dtype())});
  }
  for (const auto* side : {&r.inputs, &r.outputs})
    for (const LaunchRecord::Operand& op : *side) total += static_cast<int64_t>(op.bytes.size());
  int64_t elements = 1;
  for (int d = 0; d < spec.rank; ++d)  // clamped at each dim, so that it cannot overflow
    elements = std::min(elements * std::min(r.meta[d], kMaxElements + 1), kMaxElements + 1);
  if (total > kMaxBytes || elements > kMaxElements) return;
  std::string data = kMagic;
  put_bytes(data, r.spec);
  put_i64(data, static_cast<int64_t>(r.meta.size()));
  for (int64_t m : r.meta) put_i64(data, m);
  for (const auto* side : {&r.inputs, &r.outputs}) {
    put_i64(data, static_cast<int64_t>(side->size()));
    for (const LaunchRecord::Operand& op : *side) {
      put_i64(data, static_cast<int64_t>(op.dtype));
      put_bytes(data, op.bytes);
    }
  }
  // The first free slot, taken atomically (O_EXCL) so that processes do not clash.
  std::string hash = spec.hash();
  mkdir(launch_record_dir().c_str(), 0700);
  for (int n = 0; n < kRecordsPerSpec; ++n) {
    std::string path = launch_record_dir() + "/" + hash + "-" + std::to_string(n) + ".launch";
    int fd = open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
    if (fd < 0) continue;
    bool whole = write(fd, data.data(), data.size()) == static_cast<ssize_t>(data.size());
    close(fd);
    if (!whole) unlink(path.c_str());
    return;
  }
}

std::vector<LaunchRecord> read_records(const std::string& dir, int* bad) {
  std::vector<LaunchRecord> out;
  DIR* d = opendir(dir.c_str());
  if (!d) return out;
  std::vector<std::string> names;
  while (dirent* e = readdir(d)) {
    std::string name = e->d_name;
    if (name.size() > 7 && name.compare(name.size() - 7, 7, ".launch") == 0) names.push_back(name);
  }
  closedir(d);
  std::sort(names.begin(), names.end());
  for (const std::string& name : names) {
    std::ifstream in(dir + "/" + name, std::ios::binary);
    std::stringstream buf;
    buf << in.rdbuf();
    std::string data = buf.str();
    LaunchRecord r;
    Reader reader(data);
    bool ok = data.compare(0, sizeof kMagic - 1, kMagic) == 0;
    if (ok) {
      r.spec = reader.bytes();
      int64_t n = reader.i64();
      for (int64_t i = 0; i < n && reader.ok(); ++i) r.meta.push_back(reader.i64());
      for (auto* side : {&r.inputs, &r.outputs}) {
        int64_t count = reader.i64();
        for (int64_t i = 0; i < count && reader.ok(); ++i) {
          DType dt = static_cast<DType>(reader.i64());
          side->push_back({dt, reader.bytes()});
        }
      }
      ok = reader.ok();
    }
    if (ok) out.push_back(std::move(r));
    else if (bad) ++*bad;
  }
  return out;
}

}  // namespace ember::codegen
