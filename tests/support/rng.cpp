#include "support/rng.hpp"

#include <gtest/gtest.h>

#include <random>
#include <string>

#include "support/half.hpp"

namespace fa_test {

uint64_t next_seed() {
  static std::string last_test;
  static uint64_t counter = 0;
  std::string name = "no-test";
  if (const auto* info = ::testing::UnitTest::GetInstance()->current_test_info()) {
    name = std::string(info->test_suite_name()) + "." + info->name();
  }
  if (name != last_test) {
    last_test = name;
    counter = 0;
  }
  uint64_t h = 1469598103934665603ull;  // FNV-1a
  for (unsigned char c : name) h = (h ^ c) * 1099511628211ull;
  return h ^ (0x9e3779b97f4a7c15ull * ++counter);
}

std::vector<double> randn(size_t n, uint64_t seed, double stddev) {
  std::mt19937_64 gen(seed);
  std::normal_distribution<double> nd(0.0, stddev);
  std::vector<double> v(n);
  for (double& x : v) {
    do x = nd(gen);
    while (x == 0.0);
  }
  return v;
}

std::vector<double> fill_randn(const Tensor& t, double stddev) {
  std::vector<double> v = randn(static_cast<size_t>(t.numel()), next_seed(), stddev);
  for (double& x : v) x = round_to(t.dtype, static_cast<float>(x));
  t.write(v);
  return v;
}

}  // namespace fa_test
