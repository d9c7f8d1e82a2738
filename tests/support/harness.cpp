#include "support/harness.hpp"

#include <algorithm>
#include <cmath>
#include <sstream>

#include "support/check.hpp"
#include "reference/naive_same_dtype.hpp"
#include "support/rng.hpp"

namespace fa_test {

const char* dtype_tag(DType dt) {
  switch (dt) {
    case DType::F32: return "f32";
    case DType::F16: return "f16";
    case DType::BF16: return "bf16";
  }
  return "?";
}

namespace {
std::string num(double x) {  // 1.5 -> "1p5", valid in a gtest name
  std::ostringstream s;
  s << x;
  std::string r = s.str();
  for (char& ch : r) {
    if (ch == '.') ch = 'p';
    if (ch == '-') ch = 'm';
  }
  return r;
}
}  // namespace

std::string Case::name() const {
  std::ostringstream s;
  s << dtype_tag(dtype) << "_b" << batch << "_q" << seqlen_q << "_k" << seqlen_k << "_h" << heads_q
    << "x" << heads_kv << "_d" << head_dim;
  if (head_dim_v > 0) s << "_dv" << head_dim_v;
  if (causal) s << "_causal";
  if (window_left >= 0 || window_right >= 0) s << "_win" << num(window_left) << "_" << num(window_right);
  if (softcap > 0) s << "_cap" << num(softcap);
  if (scale > 0) s << "_scale" << num(scale);
  if (layout != Layout::BSHD) s << "_" << layout_name(layout);
  if (!with_lse) s << "_nolse";
  if (deterministic) s << "_det";
  return s.str();
}

void PrintTo(const Case& c, std::ostream* os) { *os << c.name(); }

flashattn::reference::Problem Case::problem() const {
  flashattn::reference::Problem p;
  p.batch = batch;
  p.seqlen_q = seqlen_q;
  p.seqlen_k = seqlen_k;
  p.heads_q = heads_q;
  p.heads_kv = heads_kv;
  p.head_dim = head_dim;
  p.head_dim_v = head_dim_v;
  p.scale = scale;  // float -> double: the same value the kernel gets
  p.causal = causal;
  p.window_left = window_left;
  p.window_right = window_right;
  p.softcap = softcap;
  return p;
}

flashattn::Options Case::options() const {
  flashattn::Options o;
  o.softmax_scale = scale;
  o.softcap = softcap;
  o.window_left = window_left;
  o.window_right = window_right;
  o.causal = causal;
  o.deterministic = deterministic;
  return o;
}

Instance make_instance(Device dev, const Case& c, bool backward) {
  Instance in;
  in.dev = dev;
  in.c = c;
  in.in = make_qkv(dev, c.dtype, c.layout, c.batch, c.seqlen_q, c.seqlen_k, c.heads_q, c.heads_kv,
                   c.head_dim, c.dim_v());
  in.q = fill_randn(in.in.q);
  in.k = fill_randn(in.in.k);
  in.v = fill_randn(in.in.v);
  const Layout out_layout = c.layout == Layout::Packed ? Layout::Padded : c.layout;
  in.out = make_bshd(dev, c.dtype, out_layout, c.batch, c.seqlen_q, c.heads_q, c.dim_v());
  if (c.with_lse || backward) in.lse = make_lse(dev, c.batch, c.heads_q, c.seqlen_q);
  if (backward) {
    in.dout = make_bshd(dev, c.dtype, out_layout, c.batch, c.seqlen_q, c.heads_q, c.dim_v());
    in.dO = fill_randn(in.dout);
    // Gradients of packed inputs go to separate padded tensors: the API's
    // overlap check works on address ranges, so an interleaved dQKV buffer is
    // (conservatively) refused.
    in.grad = make_qkv(dev, c.dtype, out_layout, c.batch, c.seqlen_q, c.seqlen_k, c.heads_q,
                       c.heads_kv, c.head_dim, c.dim_v());
  }
  return in;
}

flashattn::ForwardArgs Instance::fwd_args() const {
  flashattn::ForwardArgs a;
  a.q = in.q.view();
  a.k = in.k.view();
  a.v = in.v.view();
  a.out = out.view();
  if (lse.buf) a.lse = lse.view();
  a.options = c.options();
  return a;
}

flashattn::BackwardArgs Instance::bwd_args() const {
  flashattn::BackwardArgs a;
  a.q = in.q.view();
  a.k = in.k.view();
  a.v = in.v.view();
  a.out = out.view();
  a.dout = dout.view();
  a.lse = lse.view();
  a.dq = grad.q.view();
  a.dk = grad.k.view();
  a.dv = grad.v.view();
  a.options = c.options();
  return a;
}

Expected expected_forward(const Instance& in) {
  const auto p = in.c.problem();
  Expected e;
  e.out.resize(static_cast<size_t>(p.batch * p.seqlen_q * p.heads_q * p.dim_v()));
  e.lse.resize(static_cast<size_t>(p.batch * p.heads_q * p.seqlen_q));
  flashattn::reference::forward(p, in.q.data(), in.k.data(), in.v.data(), e.out.data(),
                                e.lse.data());
  flashattn::reference::naive_forward(p, in.c.dtype, in.q, in.k, in.v, &e.naive_out, &e.naive_lse);
  return e;
}

ExpectedGrads expected_backward(const Instance& in, const std::vector<double>* given_out) {
  const auto p = in.c.problem();
  ExpectedGrads g;
  g.dq.resize(in.q.size());
  g.dk.resize(in.k.size());
  g.dv.resize(in.v.size());
  flashattn::reference::backward(p, in.q.data(), in.k.data(), in.v.data(), in.dO.data(),
                                 g.dq.data(), g.dk.data(), g.dv.data());
  flashattn::reference::naive_backward(p, in.c.dtype, in.q, in.k, in.v, in.dO, &g.naive_dq,
                                       &g.naive_dk, &g.naive_dv, given_out);
  return g;
}

bool skip_if_unsupported(Device dev, const flashattn::Status& st) {
  return dev == Device::CUDA && st.code == flashattn::ErrorCode::Unsupported;
}

namespace {
double resolved_scale(const Case& c) {
  return c.scale > 0 ? c.scale : 1.0 / std::sqrt(static_cast<double>(c.head_dim));
}
}  // namespace

Magnitudes magnitudes(const Instance& in) {
  return flashattn::reference::magnitudes(in.q, in.k, in.v, in.dO, in.c.head_dim, resolved_scale(in.c),
                                          in.c.dim_v());
}

void check_forward(Device dev, const Case& c) {
  if (!device_usable(dev)) GTEST_SKIP() << "no usable " << device_name(dev) << " device";
  Instance in = make_instance(dev, c, /*backward=*/false);
  std::vector<const Tensor*> outputs{&in.out};
  if (in.lse.buf) outputs.push_back(&in.lse);
  CallGuard guard({&in.in.q, &in.in.k, &in.in.v}, outputs);
  const flashattn::Status st = flashattn::forward(in.fwd_args());
  if (skip_if_unsupported(dev, st)) GTEST_SKIP() << "Unsupported: " << st.message;
  ASSERT_TRUE(st.ok()) << "forward failed: " << st.message;
  EXPECT_TRUE(guard.wrote_exactly_outputs());
  const Expected e = expected_forward(in);
  const Magnitudes m = magnitudes(in);
  EXPECT_TRUE(within_rule("out", c.dtype, in.out.read(), e.out, e.naive_out, c.seqlen_k, c.rule_dim(),
                          m.out));
  if (in.lse.buf) {
    EXPECT_TRUE(lse_within_rule("lse", in.lse.read(), e.lse, e.naive_lse, c.head_dim));
  }
}

void check_backward(Device dev, const Case& c) {
  if (!device_usable(dev)) GTEST_SKIP() << "no usable " << device_name(dev) << " device";
  Instance in = make_instance(dev, c, /*backward=*/true);
  // The backward consumes the kernel's own forward output and LSE, as in training.
  flashattn::Status st = flashattn::forward(in.fwd_args());
  if (skip_if_unsupported(dev, st)) GTEST_SKIP() << "Unsupported (forward): " << st.message;
  ASSERT_TRUE(st.ok()) << "forward failed: " << st.message;
  CallGuard guard({&in.in.q, &in.in.k, &in.in.v, &in.out, &in.dout, &in.lse},
                  {&in.grad.q, &in.grad.k, &in.grad.v});
  st = flashattn::backward(in.bwd_args());
  if (skip_if_unsupported(dev, st)) GTEST_SKIP() << "Unsupported (backward): " << st.message;
  ASSERT_TRUE(st.ok()) << "backward failed: " << st.message;
  EXPECT_TRUE(guard.wrote_exactly_outputs());
  // The naive yardstick takes D from the O this backward was given, as the
  // fuzz oracle does (naive_same_dtype.hpp).
  const std::vector<double> given_out = in.out.read();
  const ExpectedGrads g = expected_backward(in, &given_out);
  const int64_t group = c.heads_q / c.heads_kv;
  const int64_t col_len = std::max(c.seqlen_k, c.seqlen_q * group);
  const Magnitudes m = magnitudes(in);
  EXPECT_TRUE(within_rule("dq", c.dtype, in.grad.q.read(), g.dq, g.naive_dq, c.seqlen_k, c.rule_dim(),
                          m.dq));
  EXPECT_TRUE(within_rule("dk", c.dtype, in.grad.k.read(), g.dk, g.naive_dk, col_len,
                          c.rule_dim(), m.dk));
  EXPECT_TRUE(within_rule("dv", c.dtype, in.grad.v.read(), g.dv, g.naive_dv, col_len,
                          c.rule_dim(), m.dv));
}

std::vector<Device> test_devices() {
#ifdef FA_TEST_ON_CUDA
  return {Device::CUDA};
#else
  return {Device::CPU};
#endif
}

std::string device_case_name(const ::testing::TestParamInfo<DeviceCase>& info) {
  return std::string(device_name(std::get<0>(info.param))) + "_" + std::get<1>(info.param).name();
}

}  // namespace fa_test
