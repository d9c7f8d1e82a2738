// The C ABI: version, defaults, tensor helper, and forward + backward through
// the C ABI bit-for-bit equal to the C++ API on the same inputs.
#include <gtest/gtest.h>

#include <cstring>
#include <string>

#include "flashattn/flashattn.h"
#include "flashattn/flashattn.hpp"
#include "support/c_abi.hpp"
#include "support/harness.hpp"

namespace fa_test {
namespace {

TEST(CAbi, Version) {
  EXPECT_EQ(fa_version(), FA_VERSION_MAJOR * 10000 + FA_VERSION_MINOR * 100 + FA_VERSION_PATCH);
  const std::string expect = std::to_string(FA_VERSION_MAJOR) + "." +
                             std::to_string(FA_VERSION_MINOR) + "." +
                             std::to_string(FA_VERSION_PATCH);
  EXPECT_EQ(std::string(fa_version_string()), expect);
  EXPECT_EQ(std::string(flashattn::version()), expect);
  EXPECT_EQ(fa_cuda_available(), flashattn::cuda_available() ? 1 : 0);
}

TEST(CAbi, OptionsInitDefaults) {
  fa_options o;
  std::memset(&o, 0xab, sizeof(o));  // garbage that init must overwrite
  fa_options_init(&o);
  EXPECT_EQ(o.softmax_scale, 0.0f);
  EXPECT_EQ(o.softcap, 0.0f);
  EXPECT_EQ(o.window_left, -1);
  EXPECT_EQ(o.window_right, -1);
  EXPECT_EQ(o.causal, 0);
  EXPECT_EQ(o.deterministic, 0);
  EXPECT_EQ(o.stream, nullptr);
  // The C++ defaults agree.
  const flashattn::Options cpp;
  EXPECT_EQ(cpp.softmax_scale, o.softmax_scale);
  EXPECT_EQ(cpp.softcap, o.softcap);
  EXPECT_EQ(cpp.window_left, o.window_left);
  EXPECT_EQ(cpp.window_right, o.window_right);
  EXPECT_EQ(cpp.causal, o.causal != 0);
  EXPECT_EQ(cpp.deterministic, o.deterministic != 0);
  fa_options_init(nullptr);  // must not crash
}

TEST(CAbi, TensorContiguous) {
  float buf[1];
  const int64_t shape[4] = {2, 3, 4, 8};
  const fa_tensor t = fa_tensor_contiguous(buf, FA_BF16, FA_CPU, 0, 4, shape);
  EXPECT_EQ(t.data, buf);
  EXPECT_EQ(t.dtype, FA_BF16);
  EXPECT_EQ(t.device, FA_CPU);
  EXPECT_EQ(t.device_index, 0);
  EXPECT_EQ(t.ndim, 4);
  const int64_t expect_stride[4] = {96, 32, 8, 1};
  for (int i = 0; i < 4; ++i) {
    EXPECT_EQ(t.shape[i], shape[i]);
    EXPECT_EQ(t.stride[i], expect_stride[i]);
  }
  const int64_t lse_shape[3] = {2, 4, 3};
  const fa_tensor l = fa_tensor_contiguous(buf, FA_F32, FA_CUDA, 1, 3, lse_shape);
  EXPECT_EQ(l.ndim, 3);
  EXPECT_EQ(l.device, FA_CUDA);
  EXPECT_EQ(l.device_index, 1);
  EXPECT_EQ(l.stride[0], 12);
  EXPECT_EQ(l.stride[1], 3);
  EXPECT_EQ(l.stride[2], 1);
  // The C++ twin.
  const flashattn::TensorView v =
      flashattn::TensorView::contiguous(buf, flashattn::DType::BF16, {2, 3, 4, 8});
  EXPECT_EQ(v.ndim, 4);
  EXPECT_EQ(v.numel(), 2 * 3 * 4 * 8);
  for (int i = 0; i < 4; ++i) EXPECT_EQ(v.stride[i], expect_stride[i]);
}

TEST(CAbi, DtypeHelpers) {
  EXPECT_EQ(flashattn::dtype_size(flashattn::DType::F32), 4u);
  EXPECT_EQ(flashattn::dtype_size(flashattn::DType::F16), 2u);
  EXPECT_EQ(flashattn::dtype_size(flashattn::DType::BF16), 2u);
  EXPECT_NE(std::string(flashattn::dtype_name(flashattn::DType::BF16)), "");
  EXPECT_NE(std::string(flashattn::dtype_name(flashattn::DType::F16)),
            std::string(flashattn::dtype_name(flashattn::DType::BF16)));
  // The enums are the ABI's codes.
  EXPECT_EQ(static_cast<int>(flashattn::DType::F16), FA_F16);
  EXPECT_EQ(static_cast<int>(flashattn::DType::BF16), FA_BF16);
  EXPECT_EQ(static_cast<int>(flashattn::Device::CUDA), FA_CUDA);
  EXPECT_EQ(static_cast<int>(flashattn::ErrorCode::Unsupported), FA_ERR_UNSUPPORTED);
  EXPECT_EQ(static_cast<int>(flashattn::ErrorCode::CudaError), FA_ERR_CUDA);
}

class CAbiMatchesCpp : public ::testing::TestWithParam<DeviceCase> {};

TEST_P(CAbiMatchesCpp, ForwardAndBackwardBitForBit) {
  const auto& [dev, c] = GetParam();
  if (!device_usable(dev)) GTEST_SKIP() << "no usable device";
  Instance in = make_instance(dev, c, true);
  // Second set of outputs for the C ABI run, same layouts.
  Instance twin = in;
  const Layout ol = c.layout == Layout::Packed ? Layout::Padded : c.layout;
  twin.out = make_bshd(dev, c.dtype, ol, c.batch, c.seqlen_q, c.heads_q, c.head_dim);
  twin.lse = make_lse(dev, c.batch, c.heads_q, c.seqlen_q);
  twin.grad = make_qkv(dev, c.dtype, ol, c.batch, c.seqlen_q, c.seqlen_k, c.heads_q, c.heads_kv,
                       c.head_dim);

  flashattn::Status st = flashattn::forward(in.fwd_args());
  if (skip_if_unsupported(dev, st)) GTEST_SKIP() << st.message;
  ASSERT_TRUE(st.ok()) << st.message;
  ASSERT_TRUE(flashattn::backward(in.bwd_args()).ok());

  fa_options o;
  fa_options_init(&o);
  o.softmax_scale = c.scale;
  o.softcap = c.softcap;
  o.window_left = c.window_left;
  o.window_right = c.window_right;
  o.causal = c.causal;
  o.deterministic = 1;
  fa_forward_args fa{to_c(twin.in.q.view()), to_c(twin.in.k.view()), to_c(twin.in.v.view()), to_c(twin.out.view()),
                     to_c(twin.lse.view()), o};
  ASSERT_EQ(fa_forward(&fa), FA_OK) << fa_last_error();
  EXPECT_STREQ(fa_last_error(), "");
  // The C backward consumes the C forward's own outputs.
  fa_backward_args ba{to_c(twin.in.q.view()), to_c(twin.in.k.view()), to_c(twin.in.v.view()), to_c(twin.out.view()),
                      to_c(twin.dout.view()), to_c(twin.lse.view()), to_c(twin.grad.q.view()),
                      to_c(twin.grad.k.view()), to_c(twin.grad.v.view()), o};
  ASSERT_EQ(fa_backward(&ba), FA_OK) << fa_last_error();

  auto same = [](const Tensor& a, const Tensor& b) { return a.read() == b.read(); };
  EXPECT_TRUE(same(in.out, twin.out)) << "out differs between C++ and C ABI";
  EXPECT_TRUE(same(in.lse, twin.lse)) << "lse differs";
  EXPECT_TRUE(same(in.grad.q, twin.grad.q)) << "dq differs";
  EXPECT_TRUE(same(in.grad.k, twin.grad.k)) << "dk differs";
  EXPECT_TRUE(same(in.grad.v, twin.grad.v)) << "dv differs";

  size_t ws_cpp = 0, ws_c = 1;
  ASSERT_TRUE(flashattn::forward_workspace_bytes(in.fwd_args(), &ws_cpp).ok());
  ASSERT_EQ(fa_forward_workspace_bytes(&fa, &ws_c), FA_OK);
  EXPECT_EQ(ws_cpp, ws_c);
  ASSERT_TRUE(flashattn::backward_workspace_bytes(in.bwd_args(), &ws_cpp).ok());
  ASSERT_EQ(fa_backward_workspace_bytes(&ba, &ws_c), FA_OK);
  EXPECT_EQ(ws_cpp, ws_c);
}

std::vector<Case> c_abi_cases() {
  std::vector<Case> v;
  for (DType dt : {DType::F32, DType::F16, DType::BF16}) {
    Case c;
    c.dtype = dt;
    c.batch = 2;
    c.seqlen_q = 113;
    c.seqlen_k = 267;
    c.heads_q = 4;
    c.heads_kv = 2;
    c.head_dim = 64;
    c.causal = true;
    c.deterministic = true;
    v.push_back(c);
    c.layout = Layout::BHSD;
    c.softcap = 3.0f;
    c.window_left = 40;
    c.scale = 0.2f;
    v.push_back(c);
  }
  return v;
}

INSTANTIATE_TEST_SUITE_P(Sweep, CAbiMatchesCpp,
                         ::testing::Combine(::testing::ValuesIn(test_devices()),
                                            ::testing::ValuesIn(c_abi_cases())),
                         device_case_name);

}  // namespace
}  // namespace fa_test
