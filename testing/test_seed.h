#pragma once
// Seeds for randomized tests (GoogleTest only; never linked into the runtime).

#include <gtest/gtest.h>

#include <cstdint>
#include <cstdlib>
#include <iostream>
#include <random>
#include <string>

namespace ingot::testing {

/// The seed of a randomized test: fresh on every run, so that runs explore different
/// inputs, or $INGOT_TEST_SEED to replay one. The seed is printed as INGOT_TEST_SEED=<n>,
/// which ctest shows beside a failure, so every failure can be replayed with
///
///     INGOT_TEST_SEED=<n> <test binary> --gtest_filter=<the test>
///
/// A test that needs several random streams draws them from one seed (seed + i), so that
/// replaying it with one value replays all of them.
inline uint32_t testSeed() {
  uint32_t seed = 0;
  if (const char* env = std::getenv("INGOT_TEST_SEED"); env != nullptr && *env != '\0') {
    char* end = nullptr;
    const unsigned long long v = std::strtoull(env, &end, 10);
    if (*end != '\0' || v > UINT32_MAX) {
      ADD_FAILURE() << "INGOT_TEST_SEED=" << env << " is not a seed (0 to " << UINT32_MAX << ")";
    }
    seed = static_cast<uint32_t>(v);
  } else {
    seed = std::random_device{}();
  }
  // In the XML report too (--gtest_output=xml), and printed for ctest's log.
  ::testing::Test::RecordProperty("ingot_test_seed", std::to_string(seed));
  const ::testing::TestInfo* test = ::testing::UnitTest::GetInstance()->current_test_info();
  std::cout << "INGOT_TEST_SEED=" << seed;
  if (test != nullptr) std::cout << " (" << test->test_suite_name() << "." << test->name() << ")";
  std::cout << std::endl;
  return seed;
}

}  // namespace ingot::testing
