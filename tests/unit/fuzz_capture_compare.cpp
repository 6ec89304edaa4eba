// Comparing a compiled call with eager, bit for bit: the contract of the fuzzer (see
// fuzz_capture.h). A mismatch's category names the class of failure; the minimiser keeps it.
#include <cmath>
#include <cstdio>
#include <cstring>
#include <optional>
#include <string>
#include <vector>

#include "runtime/array.h"
#include "tests/unit/fuzz_capture.h"
#include "tests/unit/helpers.h"

namespace ember::capture_fuzz {
namespace {

bool tolerant();

bool loose_nan() { return env_str("EMBER_FUZZ_NAN_BITS") == "0" || tolerant(); }

bool tolerant() { return env_str("EMBER_FUZZ_TOLERANCE") == "1"; }



// Prefix "[op]" of an ember message, to tell error classes apart.
std::string op_of(const std::string& message) {
  if (message.size() > 1 && message[0] == '[') {
    size_t close = message.find(']');
    if (close != std::string::npos) return message.substr(0, close + 1);
  }
  return "";
}

// Eager raised: the compiled call must raise an ember::Error of the same kind.
std::optional<Mismatch> compare_errors(const Outcome& e, const Outcome& c) {
  if (e.status == Outcome::OtherError) return Mismatch{"eager raised a non-ember exception", e.message};
  if (c.status == Outcome::Ok) return Mismatch{"eager raised, compiled returned", "eager: " + e.message};
  if (c.kind == ErrorKind::Internal)
    return Mismatch{"compiled raised an internal error", "eager: " + e.message + "\n    compiled: " + c.message};
  if (c.kind != e.kind)
    return Mismatch{std::string("error kind differs: eager ") + error_kind_name(e.kind) + ", compiled " + error_kind_name(c.kind),
                    "eager: " + e.message + "\n    compiled: " + c.message};
  return std::nullopt;
}

// The first element whose bytes differ (with EMBER_FUZZ_NAN_BITS=0, NaN matches any NaN).
std::optional<Mismatch> compare_bytes(const Array& ea, const Array& ca, const std::string& where) {
  Array ec = ea.contiguous(), cc = ca.contiguous();
  size_t size = itemsize(ea.dtype());
  const char *eb = static_cast<const char*>(ec.data()), *cb = static_cast<const char*>(cc.data());
  for (int64_t i = 0; i < ec.numel(); ++i) {
    if (std::memcmp(eb + i * size, cb + i * size, size) == 0) continue;
    double ev = ec.get(i), cv = cc.get(i);
    std::string cat;
    if (std::isnan(ev) && std::isnan(cv)) {
      if (loose_nan()) continue;
      cat = "NaN bits differ";
    } else if (std::isnan(ev) || std::isnan(cv)) {
      cat = "NaN where the other has a number";
    } else if (ev == 0 && cv == 0) {
      if (tolerant()) continue;
      cat = "sign of zero differs";
    } else if (tolerant() && is_floating(ea.dtype()) && test::within_chain_tolerance(ev, cv)) {
      continue;
    } else {
      cat = "values differ";
    }
    char buf[160];
    uint64_t ebits = 0, cbits = 0;
    std::memcpy(&ebits, eb + i * size, size);
    std::memcpy(&cbits, cb + i * size, size);
    std::snprintf(buf, sizeof buf, "element %lld: eager %.9g (0x%llx), compiled %.9g (0x%llx)", static_cast<long long>(i),
                  ev, static_cast<unsigned long long>(ebits), cv, static_cast<unsigned long long>(cbits));
    return Mismatch{cat, where + dtype_str(ea.dtype()) + shape_str(to_shape(ea.shape())) + " " + buf};
  }
  return std::nullopt;
}

// One output: readable, the same dtype, shape and bytes, and the same tensor where eager
// returned an argument.
std::optional<Mismatch> compare_output(const Tensor& et, const Tensor& ct, const std::vector<Arg>& args,
                                       const std::string& where) {
  if (!ct.defined()) return Mismatch{"compiled output undefined", where};
  Array ea = et.array(), ca;
  try {
    if (ct.is_traced()) return Mismatch{"compiled output is still a traced tensor", where};
    ca = ct.array();
  } catch (const Error& err) {
    return Mismatch{"compiled output unreadable", where + err.what()};
  }
  if (ea.dtype() != ca.dtype())
    return Mismatch{"dtype differs", where + "eager " + dtype_str(ea.dtype()) + ", compiled " + dtype_str(ca.dtype())};
  if (ct.dtype() != ca.dtype())
    return Mismatch{"dtype() disagrees with the data", where + dtype_str(ct.dtype()) + " vs " + dtype_str(ca.dtype())};
  if (ea.shape() != ca.shape())
    return Mismatch{"shape differs", where + "eager " + shape_str(to_shape(ea.shape())) + ", compiled " +
                                         shape_str(to_shape(ca.shape()))};
  for (size_t a = 0; a < args.size(); ++a)
    if (auto* t = std::get_if<Tensor>(&args[a]); t && t->impl() == et.impl() && ct.impl() != et.impl())
      return Mismatch{"a returned argument is not the same tensor", where + "argument " + std::to_string(a)};
  return compare_bytes(ea, ca, where);
}

}  // namespace

std::optional<Mismatch> compare(const Outcome& e, const Outcome& c, const std::vector<Arg>& args) {
  if (c.status == Outcome::OtherError)
    return Mismatch{"compiled raised a non-ember exception", c.message};
  if (e.status != Outcome::Ok) return compare_errors(e, c);
  if (c.status != Outcome::Ok) {
    std::string cat = c.kind == ErrorKind::Internal ? "compiled raised an internal error"
                                                    : std::string("eager returned, compiled raised ") + error_kind_name(c.kind) +
                                                          " " + op_of(c.message);
    return Mismatch{cat, c.message};
  }
  if (e.outs.size() != c.outs.size())
    return Mismatch{"number of outputs differs", std::to_string(e.outs.size()) + " vs " + std::to_string(c.outs.size())};
  for (size_t k = 0; k < e.outs.size(); ++k)
    if (auto m = compare_output(e.outs[k], c.outs[k], args, "output " + std::to_string(k) + ": ")) return m;
  return std::nullopt;
}

}  // namespace ember::capture_fuzz
