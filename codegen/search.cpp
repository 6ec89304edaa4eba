#include "codegen/search.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <random>
#include <set>

#include "ir/error.h"

namespace ember::codegen {

namespace {

// The knob that `k` depends on (Knob::only_with), or -1. A knob may depend only on one that
// depends on none, and must name one of the space.
int parent_of(const Space& space, size_t k) {
  if (space[k].only_with.empty()) return -1;
  for (size_t j = 0; j < space.size(); ++j)
    if (j != k && space[j].name == space[k].only_with) {
      if (!space[j].only_with.empty())
        EMBER_THROW(Value, "[max-autotune] knob '", space[k].name, "' depends on '", space[j].name,
                    "', which depends on another");
      return static_cast<int>(j);
    }
  EMBER_THROW(Value, "[max-autotune] knob '", space[k].name, "' depends on '", space[k].only_with,
              "', which the space does not have");
}

int64_t saturating_mul(int64_t a, int64_t b) {
  int64_t n;
  return __builtin_mul_overflow(a, b, &n) ? INT64_MAX : n;
}

}  // namespace

Point canonical(const Space& space, Point p) {
  for (size_t k = 0; k < space.size(); ++k) {
    int parent = parent_of(space, k);
    if (parent >= 0 && space[parent].options[p[parent]] != space[k].only_value) p[k] = 0;
  }
  return p;
}

int64_t space_size(const Space& space) {
  // A knob that nothing depends on multiplies; a knob and those that depend on it count together:
  // for each of its options, the product of the options its dependants have there.
  std::vector<int> parent(space.size());
  std::vector<bool> has_dependants(space.size(), false);
  for (size_t k = 0; k < space.size(); ++k)
    if ((parent[k] = parent_of(space, k)) >= 0) has_dependants[parent[k]] = true;
  int64_t n = 1;
  for (size_t j = 0; j < space.size(); ++j) {
    if (parent[j] >= 0) continue;
    int64_t count = static_cast<int64_t>(space[j].options.size());
    if (has_dependants[j]) {
      count = 0;
      for (int64_t value : space[j].options) {
        int64_t here = 1;
        for (size_t k = 0; k < space.size(); ++k)
          if (parent[k] == static_cast<int>(j) && space[k].only_value == value)
            here = saturating_mul(here, static_cast<int64_t>(space[k].options.size()));
        count = here > INT64_MAX - count ? INT64_MAX : count + here;
      }
    }
    n = saturating_mul(n, count);
  }
  return n;
}

namespace {

bool is_default(const Point& p) {
  return std::all_of(p.begin(), p.end(), [](int i) { return i == 0; });
}

// Every point in mixed-radix order, the default (all zeros) left out.
class Exhaustive : public Search {
 public:
  explicit Exhaustive(const Space& space) : space_(space), point_(space.size(), 0) {}
  std::optional<Point> next() override {
    if (done_ || space_.empty()) return std::nullopt;
    while (advance())
      if (canonical(space_, point_) == point_) return point_;
    done_ = true;  // wrapped round to the default: every point was proposed
    return std::nullopt;
  }
  void tell(const Point&, double) override {}

 private:
  // The next point in mixed-radix order, the first knob fastest; false on wrapping round.
  bool advance() {
    for (size_t k = 0; k < point_.size(); ++k) {
      if (++point_[k] < static_cast<int>(space_[k].options.size())) return true;
      point_[k] = 0;
    }
    return false;
  }

  Space space_;
  Point point_;
  bool done_ = false;
};

// Uniform points not proposed before.
class Random : public Search {
 public:
  Random(const Space& space, uint64_t seed) : space_(space), rng_(seed), total_(space_size(space)) {}
  std::optional<Point> next() override {
    while (static_cast<int64_t>(seen_.size()) + 1 < total_) {
      Point p = draw();
      if (!is_default(p) && seen_.insert(p).second) return p;
    }
    return std::nullopt;
  }
  void tell(const Point&, double) override {}

 protected:
  Point draw() {
    Point p;
    for (const Knob& k : space_) p.push_back(std::uniform_int_distribution<int>(0, int(k.options.size()) - 1)(rng_));
    return canonical(space_, p);
  }
  Space space_;
  std::mt19937_64 rng_;
  int64_t total_;
  std::set<Point> seen_;
};

// The tree-structured Parzen estimator of search.h, over categorical knobs.
class Bayes : public Random {
 public:
  Bayes(const Space& space, uint64_t seed) : Random(space, seed) {}
  std::optional<Point> next() override {
    if (told_.size() < kStartup) return Random::next();
    std::vector<std::vector<double>> good = frequencies(true), bad = frequencies(false);
    std::optional<Point> best;
    double best_score = -std::numeric_limits<double>::infinity();
    for (int i = 0; i < kDraws; ++i) {
      Point p = draw_from(good);
      if (is_default(p) || seen_.count(p)) continue;
      double score = 0;
      for (size_t k = 0; k < p.size(); ++k) score += std::log(good[k][p[k]]) - std::log(bad[k][p[k]]);
      if (score > best_score) best_score = score, best = p;
    }
    if (!best) return Random::next();  // the fast region is exhausted: anything new
    seen_.insert(*best);
    return best;
  }
  void tell(const Point& p, double seconds) override { told_.emplace_back(seconds, p); }

 private:
  static constexpr size_t kStartup = 4;
  static constexpr int kDraws = 24;

  // Per knob, each option's smoothed frequency among the fastest quarter (or the rest).
  std::vector<std::vector<double>> frequencies(bool fast) {
    std::vector<std::pair<double, Point>> sorted = told_;
    std::sort(sorted.begin(), sorted.end());
    size_t cut = std::max<size_t>(1, sorted.size() / 4);
    std::vector<std::vector<double>> f;
    for (size_t k = 0; k < space_.size(); ++k) {
      std::vector<double> counts(space_[k].options.size(), 1.0);  // the prior: one of each
      for (size_t i = fast ? 0 : cut; i < (fast ? cut : sorted.size()); ++i) counts[sorted[i].second[k]] += 1.0;
      double total = 0;
      for (double c : counts) total += c;
      for (double& c : counts) c /= total;
      f.push_back(counts);
    }
    return f;
  }

  Point draw_from(const std::vector<std::vector<double>>& f) {
    Point p;
    for (const std::vector<double>& weights : f)
      p.push_back(std::discrete_distribution<int>(weights.begin(), weights.end())(rng_));
    return canonical(space_, p);
  }

  std::vector<std::pair<double, Point>> told_;
};

}  // namespace

std::vector<std::string> search_names() { return {"auto", "exhaustive", "random", "bayes"}; }

std::unique_ptr<Search> make_search(std::string_view strategy, const Space& space, int expected_evaluations,
                                    uint64_t seed) {
  const int64_t size = space_size(space);  // (and checks the knobs' dependences)
  if (strategy == "auto") strategy = size - 1 <= expected_evaluations ? "exhaustive" : "bayes";
  if (strategy == "exhaustive") return std::make_unique<Exhaustive>(space);
  if (strategy == "random") return std::make_unique<Random>(space, seed);
  if (strategy == "bayes") return std::make_unique<Bayes>(space, seed);
  EMBER_THROW(Value, "[max-autotune] unknown search '", strategy, "' (valid: auto, exhaustive, random, bayes)");
}

}  // namespace ember::codegen
