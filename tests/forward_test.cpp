// Forward against the fp64 reference under DESIGN.md's rule (see
// support/check.hpp), over the sweeps in support/sweep.hpp. Every run poisons
// its outputs and checks that exactly the outputs were written.
#include <gtest/gtest.h>

#include "support/harness.hpp"
#include "support/sweep.hpp"

namespace fa_test {
namespace {

class Forward : public ::testing::TestWithParam<DeviceCase> {};

TEST_P(Forward, MatchesReference) { check_forward(std::get<0>(GetParam()), std::get<1>(GetParam())); }

INSTANTIATE_TEST_SUITE_P(Small, Forward,
                         ::testing::Combine(::testing::ValuesIn(test_devices()),
                                            ::testing::ValuesIn(small_cases())),
                         device_case_name);
INSTANTIATE_TEST_SUITE_P(Large, Forward,
                         ::testing::Combine(::testing::ValuesIn(test_devices()),
                                            ::testing::ValuesIn(large_cases(false))),
                         device_case_name);
INSTANTIATE_TEST_SUITE_P(ManyTiles, Forward,
                         ::testing::Combine(::testing::ValuesIn(test_devices()),
                                            ::testing::ValuesIn(many_tile_cases())),
                         device_case_name);
INSTANTIATE_TEST_SUITE_P(Features, Forward,
                         ::testing::Combine(::testing::ValuesIn(test_devices()),
                                            ::testing::ValuesIn(feature_cases())),
                         device_case_name);
INSTANTIATE_TEST_SUITE_P(HeadDimV, Forward,
                         ::testing::Combine(::testing::ValuesIn(test_devices()),
                                            ::testing::ValuesIn(head_dim_v_cases())),
                         device_case_name);
INSTANTIATE_TEST_SUITE_P(OddHeadDim, Forward,
                         ::testing::Combine(::testing::ValuesIn(test_devices()),
                                            ::testing::ValuesIn(odd_head_dim_cases())),
                         device_case_name);

}  // namespace
}  // namespace fa_test
