// EMBER_* list settings: read at each use (a plan reads EMBER_LOG on every call), matched by
// whole entries.
#include "tests/catch.h"

#include "runtime/config.h"
#include "tests/unit/helpers.h"

using ember::test::ScopedEnv;

TEST_CASE("list settings match whole entries or all", "[runtime]") {
  using ember::config::log_enabled;
  {
    ScopedEnv env("EMBER_LOG", nullptr);
    CHECK_FALSE(log_enabled("profile"));
  }
  {
    ScopedEnv env("EMBER_LOG", "");
    CHECK_FALSE(log_enabled("profile"));
  }
  {
    ScopedEnv env("EMBER_LOG", "compile,profile");
    CHECK(log_enabled("profile"));
    CHECK(log_enabled("compile"));
    CHECK_FALSE(log_enabled("prof"));
    CHECK_FALSE(log_enabled("profiles"));
    CHECK_FALSE(log_enabled("cache"));
  }
  {
    ScopedEnv env("EMBER_LOG", ",,cache,");
    CHECK(log_enabled("cache"));
    CHECK_FALSE(log_enabled(""));
  }
  {
    ScopedEnv env("EMBER_LOG", "all");
    CHECK(log_enabled("anything"));
  }
  ScopedEnv env("EMBER_DISABLE_PASSES", "cse,dce");
  CHECK(ember::config::pass_disabled("dce"));
  CHECK_FALSE(ember::config::pass_disabled("fuse"));
}
