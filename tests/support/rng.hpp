// Fresh random normal inputs. Seeds come from the running test's name and a
// counter that restarts with each test, so every tensor differs from every
// other, and a failing test reproduces alone (gtest_filter) with the same data.
#pragma once

#include <cstdint>
#include <vector>

#include "support/tensor.hpp"

namespace fa_test {

uint64_t next_seed();
std::vector<double> randn(size_t n, uint64_t seed, double stddev = 1.0);
// Fills t with N(0, stddev^2) values rounded to its dtype; returns what was
// stored (dense, row-major), i.e. exactly what a kernel will read.
std::vector<double> fill_randn(const Tensor& t, double stddev = 1.0);

}  // namespace fa_test
