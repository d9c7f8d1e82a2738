// Length 0 is a no-op returning Ok; Sk = 0 with Sq > 0 means every row sees
// no key (O = 0, LSE = -inf, dQ = 0); Sq = 0 with Sk > 0 gives dK = dV = 0.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "support/harness.hpp"

namespace fa_test {
namespace {

struct Shape {
  int64_t b, sq, sk;
};

class Empty : public ::testing::TestWithParam<std::tuple<Device, DType, Shape>> {};

TEST_P(Empty, IsANoOpOrGivesTheEmptyRowAnswer) {
  const auto& [dev, dt, s] = GetParam();
  if (!device_usable(dev)) GTEST_SKIP() << "no usable device";
  Case c;
  c.dtype = dt;
  c.batch = s.b;
  c.seqlen_q = s.sq;
  c.seqlen_k = s.sk;
  c.heads_q = 4;
  c.heads_kv = 2;
  c.head_dim = 64;
  c.causal = s.sq % 2 == 1;
  Instance in = make_instance(dev, c, true);
  {
    CallGuard guard({&in.in.q, &in.in.k, &in.in.v}, {&in.out, &in.lse});
    const flashattn::Status st = flashattn::forward(in.fwd_args());
    if (skip_if_unsupported(dev, st)) GTEST_SKIP() << st.message;
    ASSERT_TRUE(st.ok()) << st.message;
    EXPECT_TRUE(guard.wrote_exactly_outputs());
  }
  for (double x : in.out.read()) ASSERT_EQ(x, 0.0);
  for (double x : in.lse.read()) ASSERT_EQ(x, -std::numeric_limits<double>::infinity());
  {
    CallGuard guard({&in.in.q, &in.in.k, &in.in.v, &in.out, &in.lse, &in.dout},
                    {&in.grad.q, &in.grad.k, &in.grad.v});
    const flashattn::Status st = flashattn::backward(in.bwd_args());
    if (skip_if_unsupported(dev, st)) GTEST_SKIP() << st.message;
    ASSERT_TRUE(st.ok()) << st.message;
    EXPECT_TRUE(guard.wrote_exactly_outputs());
  }
  for (const Tensor* t : {&in.grad.q, &in.grad.k, &in.grad.v})
    for (double x : t->read()) ASSERT_EQ(x, 0.0);
}

std::string empty_name(const ::testing::TestParamInfo<std::tuple<Device, DType, Shape>>& i) {
  const auto& [dev, dt, s] = i.param;
  return std::string(device_name(dev)) + "_" + dtype_tag(dt) + "_b" + std::to_string(s.b) + "_q" +
         std::to_string(s.sq) + "_k" + std::to_string(s.sk);
}

INSTANTIATE_TEST_SUITE_P(Shapes, Empty,
                         ::testing::Combine(::testing::ValuesIn(test_devices()),
                                            ::testing::Values(DType::F32, DType::F16, DType::BF16),
                                            ::testing::Values(Shape{0, 17, 33}, Shape{2, 0, 33},
                                                              Shape{2, 17, 0}, Shape{2, 0, 0},
                                                              Shape{0, 0, 0}, Shape{1, 1, 0})),
                         empty_name);

}  // namespace
}  // namespace fa_test
