// The Catch2 v2 entry point (v3 links Catch2WithMain instead).
#if !__has_include(<catch2/catch_test_macros.hpp>)
#define CATCH_CONFIG_MAIN
#include <catch2/catch.hpp>
#endif
