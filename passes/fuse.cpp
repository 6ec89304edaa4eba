#include "passes/fuse.h"

#include <algorithm>
#include <limits>
#include <unordered_set>

#include "runtime/config.h"

namespace ember {

namespace {

class Fuser {
 public:
  Fuser(const Graph& g, const std::function<bool(const Node*)>& can_compute)
      : can_compute_(can_compute), position_(g.id_bound(), -1), group_of_(g.id_bound(), -1) {
    int p = 0;
    for (Node* n : g.nodes()) position_[n->id()] = p++;
    log_ = config::log_enabled("fusion");
    for (Node* n : g.nodes()) {
      if (n->num_outputs() != 1 || !can_compute_(n)) continue;
      if (n->info().is_elementwise()) place(n, n->type().shape);
      else if (folded_dim(n) >= 0) place(n, n->inputs()[0].type().shape);
    }
    for (size_t p = 0; p < groups_.size(); ++p) adopt_by_line_reader(static_cast<int>(p));
  }

  // The non-empty groups (merging empties some).
  std::vector<FusionGroup> groups() && {
    std::vector<FusionGroup> out;
    for (FusionGroup& g : groups_)
      if (!g.nodes.empty()) out.push_back(std::move(g));
    return out;
  }

 private:
  // Joins its producers' groups over `domain` (n's shape, or a reduction's input shape; an
  // elementwise node over a row or column group's lines joins it too) and merges them into one
  // when that keeps it convex; else joins the first one that does; else starts a group.
  void place(Node* n, const Shape& domain) {
    const int folds = n->info().is_elementwise() ? -1 : folded_dim(n);
    std::vector<int> candidates;
    std::string why_not;
    // A group n can join: of its domain (or of its lines' shape, for elementwise n), folding the
    // same dim if both fold one, and agreeing with the candidates so far.
    auto fits = [&](const FusionGroup& group) {
      bool same = group.domain == domain && (folds < 0 || group.folds < 0 || group.folds == folds);
      bool on_lines = folds < 0 && group.folds >= 0 && lines_of(group) == domain;
      if (!same && !on_lines) return false;
      for (int c : candidates) {
        const FusionGroup& other = groups_[c];
        if (other.domain != group.domain || (other.folds >= 0 && group.folds >= 0 && other.folds != group.folds))
          return false;
      }
      return true;
    };
    for (const Value& in : n->inputs()) {
      int g = group_of_[in.node->id()];
      if (g < 0 || std::find(candidates.begin(), candidates.end(), g) != candidates.end()) continue;
      if (!fits(groups_[g])) {
        why_not += " group " + std::to_string(g) + ": another domain;";
        continue;
      }
      candidates.push_back(g);
    }
    // No producer's group: a group over the same domain that reads one of n's inputs too (a
    // sibling: mean and variance of one input in one pass over it).
    if (candidates.empty()) {
      for (const Value& in : n->inputs())
        for (const Use& u : in.node->uses()) {
          int g = u.user && u.user != n ? group_of_[u.user->id()] : -1;
          if (g >= 0 && groups_[g].domain == domain && fits(groups_[g]) &&
              std::find(candidates.begin(), candidates.end(), g) == candidates.end())
            candidates.push_back(g);
        }
      if (candidates.size() > 1) candidates.resize(1);  // joining one is enough to share the reads
    }
    if (candidates.size() > 1 && !leaves_and_returns(n, candidates)) {
      for (size_t i = 1; i < candidates.size(); ++i) merge(candidates[i], candidates[0]);
      add(n, candidates[0], folds);
      if (log_) config::log("fusion", name(n) + " joins groups " + list(candidates) + ", merged into " + std::to_string(candidates[0]));
      return;
    }
    for (int g : candidates) {
      if (const Node* path = leaves_and_returns(n, {g})) {
        why_not += " group " + std::to_string(g) + ": its value reaches here through " +
                   std::string(path->info().name) + ";";
        continue;
      }
      add(n, g, folds);
      if (log_) config::log("fusion", name(n) + " joins group " + std::to_string(g));
      return;
    }
    group_of_[n->id()] = static_cast<int>(groups_.size());
    groups_.push_back({{n}, domain, folds});
    if (log_)
      config::log("fusion", name(n) + " starts group " + std::to_string(groups_.size() - 1) +
                                (why_not.empty() ? "" : " (not joined:" + why_not + ")"));
  }

  // An elementwise group over the lines of the one row or column group that reads it joins that
  // group as line values. It was placed before the reader folded anything, so the reader was
  // not a row group yet: a layer norm's shift, sunk below a residual add (simplify's [Note:
  // slices sunk below elementwise ops]), was a kernel of its own over [rows, 1].
  void adopt_by_line_reader(int p) {
    const FusionGroup& group = groups_[p];
    if (group.nodes.empty() || group.folds >= 0) return;
    int reader = -1;
    for (const Node* n : group.nodes)
      for (const Use& u : n->uses()) {
        int r = u.user ? group_of_[u.user->id()] : p;  // a graph output is stored either way
        if (r == p) continue;
        if (r < 0 || (reader >= 0 && r != reader)) return;  // read outside one group
        reader = r;
      }
    if (reader < 0 || groups_[reader].folds < 0 || lines_of(groups_[reader]) != group.domain) return;
    if (leaves_and_returns(group.nodes.front(), {p, reader})) return;
    if (log_) config::log("fusion", "group " + std::to_string(p) + " joins group " + std::to_string(reader) + " as line values");
    merge(p, reader);
  }

  // The domain with its folded dim 1: the shape of a line's values.
  static Shape lines_of(const FusionGroup& group) {
    Shape lines = group.domain;
    lines[group.folds] = Dim(1);
    return lines;
  }

  void add(Node* n, int g, int folds) {
    group_of_[n->id()] = g;
    groups_[g].nodes.push_back(n);
    if (folds >= 0) groups_[g].folds = folds;
  }

  // Moves group `from` into group `into`, keeping graph order; `from` is left empty.
  void merge(int from, int into) {
    for (Node* m : groups_[from].nodes) group_of_[m->id()] = into;
    if (groups_[from].folds >= 0) groups_[into].folds = groups_[from].folds;
    std::vector<Node*>& a = groups_[into].nodes;
    a.insert(a.end(), groups_[from].nodes.begin(), groups_[from].nodes.end());
    std::sort(a.begin(), a.end(), [&](Node* x, Node* y) { return position_[x->id()] < position_[y->id()]; });
    groups_[from].nodes.clear();
  }

  // A node outside the set {n} + groups `gs` that depends on the set and that the set depends
  // on: then the set is not convex and cannot run as one step. Each group is convex alone, so a
  // path out and back in ends at n, or (with several groups) at a member of another group: the
  // search starts from n's inputs, and with several groups from every member's. Nodes before the
  // set's first cannot depend on it, which bounds the search: joining a chain costs O(1).
  const Node* leaves_and_returns(const Node* n, const std::vector<int>& gs) {
    auto member = [&](const Node* m) {
      return m == n || std::find(gs.begin(), gs.end(), group_of_[m->id()]) != gs.end();
    };
    int start = position_[n->id()];
    for (int g : gs) start = std::min(start, position_[groups_[g].nodes.front()->id()]);
    std::vector<const Node*> stack;
    auto push_inputs = [&](const Node* m) {
      for (const Value& in : m->inputs())
        if (!member(in.node)) stack.push_back(in.node);
    };
    push_inputs(n);
    if (gs.size() > 1)
      for (int g : gs)
        for (const Node* m : groups_[g].nodes) push_inputs(m);
    std::unordered_set<const Node*> seen;
    std::unordered_set<int> expanded;
    // A node in another group runs when its whole group does: it waits for the inputs of every
    // member. So a path may go into that group at one member and out at another, and a group
    // that starts before the set may still wait for it (a scalar count and its division, one
    // group, around a row group that reads the count and makes the sum divided).
    auto inputs_reach_set = [&](const Node* m) -> const Node* {
      for (const Value& in : m->inputs()) {
        if (member(in.node)) return m;
        stack.push_back(in.node);
      }
      return nullptr;
    };
    while (!stack.empty()) {
      const Node* m = stack.back();
      stack.pop_back();
      if (!seen.insert(m).second) continue;
      int h = group_of_[m->id()];
      // A group that ends before the set cannot wait for it, as no node before it can.
      if (h >= 0 && position_[groups_[h].nodes.back()->id()] >= start && expanded.insert(h).second) {
        for (const Node* x : groups_[h].nodes)
          if (const Node* found = inputs_reach_set(x)) return found;
        continue;
      }
      if (h >= 0 || position_[m->id()] < start) continue;
      if (const Node* found = inputs_reach_set(m)) return found;
    }
    return nullptr;
  }

  static std::string list(const std::vector<int>& gs) {
    std::string s;
    for (int g : gs) s += (s.empty() ? "" : ", ") + std::to_string(g);
    return s;
  }

  static std::string name(const Node* n) {
    return std::string(n->info().name) + " (node " + std::to_string(n->id()) + ")";
  }

  const std::function<bool(const Node*)>& can_compute_;
  std::vector<int> position_, group_of_;
  std::vector<FusionGroup> groups_;
  bool log_ = false;
};

}  // namespace

int folded_dim(const Node* n) {
  if (!n->info().is_reduction() || n->num_outputs() != 1 || n->inputs().size() != 1) return -1;
  if (!is_plain_fold(n->op)) return -1;
  int64_t rank = static_cast<int64_t>(n->inputs()[0].type().shape.size());
  if (rank == 0) return -1;
  std::vector<int64_t> axes = normalize_axes(n->info().name, attr_ints(n->attrs, "axes"), rank);
  if (axes.empty() && rank == 1) return 0;
  if (axes.size() != 1 || axes[0] < rank - 2) return -1;
  // Without keepdim, a row kernel's [rows] would broadcast against the domain from the right,
  // not per row, and a column kernel's [outer, inner] likewise; a 1-d input has one row, and a
  // 2-d one's columns are its last dim, so theirs broadcast the same either way.
  bool aligned = attr_bool(n->attrs, "keepdim") || rank == 1 || (rank == 2 && axes[0] == 0);
  return aligned ? static_cast<int>(axes[0]) : -1;
}

std::vector<FusionGroup> find_fusion_groups(const Graph& g,
                                            const std::function<bool(const Node*)>& can_compute) {
  return Fuser(g, can_compute).groups();
}

}  // namespace ember
