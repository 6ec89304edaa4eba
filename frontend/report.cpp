#include "frontend/report.h"

#include <cstdio>
#include <map>
#include <set>
#include <sstream>

namespace ember {

namespace {

std::string quote(const std::string& s) {
  std::string out = "\"";
  for (char c : s) {
    switch (c) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\n': out += "\\n"; break;
      case '\t': out += "\\t"; break;
      default:
        if (static_cast<unsigned char>(c) < 0x20) {
          char buf[8];
          std::snprintf(buf, sizeof buf, "\\u%04x", c);
          out += buf;
        } else {
          out += c;
        }
    }
  }
  return out + "\"";
}

template <class T, class F>
std::string json_list(const std::vector<T>& items, F&& item) {
  std::string out = "[";
  for (size_t i = 0; i < items.size(); ++i) out += (i ? ", " : "") + item(items[i]);
  return out + "]";
}

// Each line of `text` after `indent`.
void write_indented(std::ostringstream& out, const std::string& text, const char* indent) {
  std::istringstream lines(text);
  for (std::string line; std::getline(lines, line);) out << indent << line << "\n";
}

// "1.5 MiB", "12.0 KiB", "100 B".
std::string size_text(size_t bytes) {
  char s[32];
  if (bytes >= (1u << 20)) std::snprintf(s, sizeof s, "%.1f MiB", static_cast<double>(bytes) / (1024.0 * 1024.0));
  else if (bytes >= 1024) std::snprintf(s, sizeof s, "%.1f KiB", static_cast<double>(bytes) / 1024.0);
  else std::snprintf(s, sizeof s, "%zu B", bytes);
  return s;
}

}  // namespace

// "mode max-autotune: static plan holding 1.5 MiB between calls; tuned 5 steps in 1.20 s (3 from
// the tuning database)", then each step whose choice is not the default, and each that was timed.
std::string mode_summary(const GraphInfo& g) {
  if (g.mode.empty()) return "";
  std::ostringstream out;
  out << "mode " << g.mode << ":" << (g.static_plan ? " static plan" : " buffers per call");
  if (g.static_plan) {
    out << " holding " << size_text(g.held_bytes) << " between calls";
    if (g.static_plans > 1) out << " in " << g.static_plans << " plans";
    if (g.held_limit != SIZE_MAX) out << " (at most " << size_text(g.held_limit) << ")";
  }
  if (g.autotuned) {
    int known = 0, twins = 0, defaults = 0, candidates = 0;
    for (const TuningRecord& t : g.tuning) {
      known += t.from_database && t.same_as < 0;
      twins += t.same_as >= 0;
      defaults += t.default_us > 0;
      candidates += t.timed;
    }
    char s[32];
    std::snprintf(s, sizeof s, "%.2f", g.autotune_s);
    std::set<std::string> buckets;
    for (const TuningRecord& t : g.tuning) buckets.insert(t.sizes);
    out << "; tuned " << g.tuning.size() << " steps";
    if (buckets.size() > 1 || (buckets.size() == 1 && !buckets.begin()->empty()))
      out << " over " << buckets.size() << " bucket" << (buckets.size() > 1 ? "s" : "") << " of sizes";
    out << " in " << s << " s (" << known << " from the tuning database, " << twins << " as an identical earlier step; timed "
        << defaults << " defaults and " << candidates << " candidates)";
  }
  out << "\n";
  // The steps that took the choice of an identical earlier step are listed on its line.
  std::map<std::pair<std::string, int>, std::string> twins;
  for (const TuningRecord& t : g.tuning)
    if (t.same_as >= 0) twins[{t.sizes, t.same_as}] += (twins[{t.sizes, t.same_as}].empty() ? "" : ", ") + std::to_string(t.step);
  for (const TuningRecord& t : g.tuning) {
    if (t.same_as >= 0 || (t.from_database && t.winner == "default")) continue;
    out << "  step " << t.step << (t.sizes.empty() ? "" : " (" + t.sizes + ")") << " " << t.name << ": ";
    if (t.from_database) {
      out << t.winner << " (from the tuning database";
    } else {
      if (t.winner == "default") out << "default kept, " << static_cast<int64_t>(t.default_us) << " us";
      else out << t.winner << " " << static_cast<int64_t>(t.winner_us) << " us, default " << static_cast<int64_t>(t.default_us) << " us";
      out << " (" << t.timed << " timed" << (t.rejected ? ", " + std::to_string(t.rejected) + " rejected" : "");
    }
    auto also = twins.find({t.sizes, t.step});
    out << (also == twins.end() ? "" : "; also step" + std::string(also->second.find(',') == std::string::npos ? " " : "s ") + also->second) << ")\n";
  }
  return out.str();
}

std::string Report::text() const {
  std::ostringstream out;
  out << "graphs: " << graph_count() << ", graph breaks: " << graph_break_count()
      << ", recompiles: " << recompiles.size() << "\n";
  for (const GraphInfo& g : graphs) {
    out << "  graph " << g.id << ": " << g.op_count << " ops (";
    bool first = true;
    for (const auto& [name, n] : g.ops) {
      out << (first ? "" : ", ") << name << " x" << n;
      first = false;
    }
    char ms[32];
    std::snprintf(ms, sizeof ms, "%.2f", g.compile_ms);
    out << "), " << g.steps << " steps, " << g.buffers << " buffers, " << g.allocations
        << " allocations per call, compile " << ms << " ms" << (g.cache_hit ? " (cached)" : "") << "\n";
    out << "    " << g.kernels << " generated kernels (" << g.kernels_compiled << " compiled now, " << g.kernels_from_disk
        << " from the disk cache)";
    std::map<std::string, int> interpreted;
    for (const std::string& op : g.interpreter_ops) ++interpreted[op];
    if (!interpreted.empty()) {
      out << "; on the interpreter:";
      for (const auto& [name, n] : interpreted) out << " " << name << " x" << n;
    }
    out << "\n";
    write_indented(out, mode_summary(g), "    ");
  }
  for (size_t i = 0; i < breaks.size(); ++i) {
    const GraphBreak& b = breaks[i];
    out << "  break " << i + 1 << " [" << b.category << "] at " << b.location() << ": " << b.reason;
    if (!b.op.empty()) out << " (op: " << b.op << ")";
    out << "\n    hint: " << b.hint << "\n";
  }
  for (const Recompile& r : recompiles) out << "  recompile: guard failed: " << r.guard << "; " << r.action << "\n";
  if (!guards.empty()) {
    out << "  guards:\n";
    for (const std::string& g : guards) out << "    " << g << "\n";
  }
  for (const std::string& n : notes) out << "  note: " << n << "\n";
  if (segment_evictions) out << "  segment cache: " << segment_evictions << " compiled graphs evicted\n";
  return out.str();
}

std::string Report::json() const {
  auto tuned = [](const TuningRecord& t) {
    return "{\"step\": " + std::to_string(t.step) + ", \"name\": " + quote(t.name) + ", \"winner\": " + quote(t.winner) +
           ", \"default_us\": " + std::to_string(t.default_us) + ", \"winner_us\": " + std::to_string(t.winner_us) +
           ", \"from_database\": " + (t.from_database ? "true" : "false") + ", \"timed\": " + std::to_string(t.timed) +
           ", \"rejected\": " + std::to_string(t.rejected) + ", \"sizes\": " + quote(t.sizes) +
           ", \"same_as\": " + std::to_string(t.same_as) + "}";
  };
  auto graph = [&](const GraphInfo& g) {
    std::string ops = "{";
    bool first = true;
    for (const auto& [name, n] : g.ops) {
      ops += (first ? "" : ", ") + quote(name) + ": " + std::to_string(n);
      first = false;
    }
    char ms[32];
    std::snprintf(ms, sizeof ms, "%.3f", g.compile_ms);
    std::string passes = "{";
    for (const auto& [pass, t] : g.pass_ms) {
      char v[32];
      std::snprintf(v, sizeof v, "%.3f", t);
      passes += (passes.size() > 1 ? ", " : "") + quote(pass) + ": " + v;
    }
    passes += "}";
    std::string interpreter = "[";
    for (const std::string& op : g.interpreter_ops) interpreter += (interpreter.size() > 1 ? ", " : "") + quote(op);
    interpreter += "]";
    return "{\"id\": " + std::to_string(g.id) + ", \"hash\": \"" + std::to_string(g.hash) +
           "\", \"op_count\": " + std::to_string(g.op_count) + ", \"ops\": " + ops + "}, \"compile_ms\": " + ms + ", \"pass_ms\": " + passes +
           ", \"steps\": " + std::to_string(g.steps) + ", \"buffers\": " + std::to_string(g.buffers) +
           ", \"allocations\": " + std::to_string(g.allocations) + ", \"kernels\": " + std::to_string(g.kernels) +
           ", \"kernels_compiled\": " + std::to_string(g.kernels_compiled) +
           ", \"kernels_from_disk\": " + std::to_string(g.kernels_from_disk) + ", \"interpreter_ops\": " + interpreter +
           ", \"cache_hit\": " + (g.cache_hit ? "true" : "false") + ", \"mode\": " + quote(g.mode) +
           ", \"static_plan\": " + (g.static_plan ? "true" : "false") +
           ", \"held_bytes\": " + std::to_string(g.held_bytes) + ", \"autotuned\": " +
           (g.autotuned ? "true" : "false") + ", \"autotune_timed\": " + std::to_string(g.autotune_timed) +
           ", \"tuning\": " + json_list(g.tuning, tuned) + ", \"ir\": " + quote(g.ir) + "}";
  };
  auto brk = [](const GraphBreak& b) {
    return "{\"category\": " + quote(b.category) + ", \"reason\": " + quote(b.reason) + ", \"op\": " + quote(b.op) +
           ", \"file\": " + quote(b.file) + ", \"line\": " + std::to_string(b.line) + ", \"hint\": " + quote(b.hint) + "}";
  };
  auto rec = [](const Recompile& r) { return "{\"guard\": " + quote(r.guard) + ", \"action\": " + quote(r.action) + "}"; };
  return "{\"graph_count\": " + std::to_string(graph_count()) +
         ", \"graph_break_count\": " + std::to_string(graph_break_count()) +
         ", \"graphs\": " + json_list(graphs, graph) + ", \"breaks\": " + json_list(breaks, brk) +
         ", \"guards\": " + json_list(guards, quote) + ", \"recompiles\": " + json_list(recompiles, rec) +
         ", \"notes\": " + json_list(notes, quote) +
         ", \"segment_evictions\": " + std::to_string(segment_evictions) + "}";
}

}  // namespace ember
