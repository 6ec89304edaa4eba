// max-autotune's database: for each step it measured, the choice that won, so that a second
// process (or a second model with the same steps) takes it without timing anything.
//
// Entries live beside the kernel cache, under <EMBER_CACHE_DIR>/tuning, with its integrity rules
// ([Note: the disk cache]: 0700/0600, atomic rename, a checksum; a corrupt, truncated or foreign
// entry is a logged miss). An entry is keyed by the SHA-256 of the step's signature, which the
// tuner writes (the step's spec or library call, its sizes' bucket, strides, dtypes, thread
// count, ember's version) with this machine's CPU model and features added here; the payload
// holds the signature itself beside the choice, so that a key that collides is a miss and the
// database can be listed.
#pragma once

#include <optional>
#include <string>
#include <vector>

namespace ember {

// What max-autotune did for one step of a plan, for the report.
struct TuningRecord {
  int step = 0;
  std::string name;        // the step's kernel, or its op
  double default_us = 0;   // the default's median time (0: not timed, the choice came from the database)
  std::string winner;      // "default", or the choice that replaced it ("lanes=32 threads=1")
  double winner_us = 0;    // its median time (0 likewise)
  bool from_database = false;
  int timed = 0;           // candidates timed (the default not counted)
  int rejected = 0;        // candidates that computed another value, or failed to compile
  std::string sizes;       // the bucket of sizes it was tuned for ("s0 in 33..64"); "" for fixed sizes
  int same_as = -1;        // an earlier step of the plan with the same signature, whose choice it took
};

}  // namespace ember

namespace ember::tuning_db {

// This machine, as tuning results depend on it: the CPU's model name and feature flags.
std::string machine();

// The choice stored for `signature` on this machine, or nothing.
std::optional<std::string> load(const std::string& signature);
// Stores it (best effort, as the kernel cache).
void store(const std::string& signature, const std::string& choice);

struct Entry {
  std::string key, signature, choice;
};
// Every whole entry, for any machine (`ember-tuning list`).
std::vector<Entry> list();
// Removes every entry; returns how many there were.
int clear();

}  // namespace ember::tuning_db
