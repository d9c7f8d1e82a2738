// Backward (dq, dk, dv) against the fp64 reference's backward, itself checked
// by finite differences in reference_test.cpp, under DESIGN.md's rule. The
// backward consumes the kernel's own forward output and LSE.
#include <gtest/gtest.h>

#include "support/harness.hpp"
#include "support/sweep.hpp"

namespace fa_test {
namespace {

class Backward : public ::testing::TestWithParam<DeviceCase> {};

TEST_P(Backward, MatchesReference) { check_backward(std::get<0>(GetParam()), std::get<1>(GetParam())); }

INSTANTIATE_TEST_SUITE_P(Small, Backward,
                         ::testing::Combine(::testing::ValuesIn(test_devices()),
                                            ::testing::ValuesIn(small_cases())),
                         device_case_name);
INSTANTIATE_TEST_SUITE_P(Large, Backward,
                         ::testing::Combine(::testing::ValuesIn(test_devices()),
                                            ::testing::ValuesIn(large_cases(true))),
                         device_case_name);
INSTANTIATE_TEST_SUITE_P(Features, Backward,
                         ::testing::Combine(::testing::ValuesIn(test_devices()),
                                            ::testing::ValuesIn(feature_cases())),
                         device_case_name);
INSTANTIATE_TEST_SUITE_P(HeadDimV, Backward,
                         ::testing::Combine(::testing::ValuesIn(test_devices()),
                                            ::testing::ValuesIn(head_dim_v_cases())),
                         device_case_name);
INSTANTIATE_TEST_SUITE_P(OddHeadDim, Backward,
                         ::testing::Combine(::testing::ValuesIn(test_devices()),
                                            ::testing::ValuesIn(odd_head_dim_cases())),
                         device_case_name);

}  // namespace
}  // namespace fa_test
