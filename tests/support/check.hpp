// DESIGN.md's correctness rule (src/reference/rule.hpp states the bounds and
// their calibration), as gtest assertions. FA_TEST_VERBOSE=1 prints every
// comparison: how close each run came to its bound.
#pragma once

#include <gtest/gtest.h>

#include <cstdint>
#include <string>
#include <vector>

#include "flashattn/flashattn.hpp"
#include "reference/rule.hpp"

namespace fa_test {

using flashattn::reference::ErrorStats;
using flashattn::reference::fp32_rel_tol;
using flashattn::reference::measure;

// `naive` may be empty for fp32. `reduce_len` is the rule's L, `magnitude` its
// M (0: no noise floor).
::testing::AssertionResult within_rule(const std::string& what, flashattn::DType dt,
                                       const std::vector<double>& out,
                                       const std::vector<double>& ref,
                                       const std::vector<double>& naive, int64_t reduce_len,
                                       int64_t head_dim, double magnitude);

// score_err: rule.hpp's allowance for score errors beyond fp32 (fp8).
::testing::AssertionResult lse_within_rule(const std::string& what, const std::vector<double>& out,
                                           const std::vector<double>& ref,
                                           const std::vector<double>& naive, int64_t head_dim,
                                           double score_err = 0);

}  // namespace fa_test
