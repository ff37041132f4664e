// Entry point of the Catch2 unit-test binary; the tests live beside their modules.
#define CATCH_CONFIG_MAIN
#include <catch2/catch.hpp>
