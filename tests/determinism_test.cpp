// Same inputs twice give bit-identical outputs: the forward always, the
// backward when options.deterministic is set; on the CPU also across OpenMP
// thread counts 1 and 2.
#include <gtest/gtest.h>

#include <omp.h>

#include <cstring>
#include <deque>
#include <thread>
#include <vector>

#include "support/harness.hpp"

namespace fa_test {
namespace {

struct Outputs {
  std::vector<uint8_t> out, lse, dq, dk, dv;
};

// Raw bytes of the outputs' buffers (outputs never share a buffer with inputs
// here, and gaps hold the same poison each run).
Outputs run(const Instance& in) {
  CallGuard g1({&in.in.q, &in.in.k, &in.in.v}, {&in.out, &in.lse});
  flashattn::Status st = flashattn::forward(in.fwd_args());
  EXPECT_TRUE(st.ok()) << st.message;
  CallGuard g2({&in.in.q, &in.in.k, &in.in.v, &in.out, &in.lse, &in.dout},
               {&in.grad.q, &in.grad.k, &in.grad.v});
  st = flashattn::backward(in.bwd_args());
  EXPECT_TRUE(st.ok()) << st.message;
  return {in.out.buf->to_host(), in.lse.buf->to_host(), in.grad.q.buf->to_host(),
          in.grad.k.buf->to_host(), in.grad.v.buf->to_host()};
}

void expect_same(const Outputs& a, const Outputs& b, bool grads) {
  EXPECT_TRUE(a.out == b.out) << "forward output differs between runs";
  EXPECT_TRUE(a.lse == b.lse) << "LSE differs between runs";
  if (!grads) return;
  EXPECT_TRUE(a.dq == b.dq) << "dq differs between runs";
  EXPECT_TRUE(a.dk == b.dk) << "dk differs between runs";
  EXPECT_TRUE(a.dv == b.dv) << "dv differs between runs";
}

std::vector<Case> det_cases() {
  std::vector<Case> v;
  for (DType dt : {DType::F32, DType::F16, DType::BF16}) {
    Case c;
    c.dtype = dt;
    c.batch = 2;
    c.seqlen_q = 267;
    c.seqlen_k = 267;
    c.heads_q = 8;
    c.heads_kv = 1;  // MQA: every query head adds into the same dK/dV
    c.head_dim = 64;
    c.causal = true;
    c.deterministic = true;
    v.push_back(c);
    c.seqlen_q = 113;
    c.seqlen_k = 1030;
    c.heads_q = 4;
    c.heads_kv = 2;
    c.head_dim = 128;
    c.causal = false;
    c.layout = Layout::Packed;
    v.push_back(c);
    // Softcap with a window at head dim 256 (the Hopper backward's softcap
    // kernel at its third tile; its key tiles run backwards in this mode).
    c.seqlen_q = 130;
    c.seqlen_k = 301;
    c.head_dim = 256;
    c.softcap = 20.0f;
    c.window_left = 70;
    c.window_right = 0;
    c.layout = Layout::BSHD;
    v.push_back(c);
    // Many tiles both ways for the CPU backward's wavefront, whose tasks wait
    // on the two tasks before them instead of a barrier per step: more query
    // tiles than KV tiles (the waits on dQ skip the steps past the last KV
    // tile), rows that see no key (bottom-right causal, Sq > Sk), GQA.
    c.seqlen_q = 1500;
    c.seqlen_k = 400;
    c.heads_q = 4;
    c.heads_kv = 2;
    c.head_dim = 64;
    c.softcap = 0.0f;
    c.window_left = c.window_right = -1;
    c.causal = true;
    v.push_back(c);
    // More KV tiles than query tiles, rows of 1024 keys and more (fp32 runs
    // on the AMX tiles there, where the CPU has them).
    c.seqlen_q = 1100;
    c.seqlen_k = 1100;
    c.head_dim = 128;
    c.causal = false;
    v.push_back(c);
  }
  return v;
}

class Determinism : public ::testing::TestWithParam<DeviceCase> {};

TEST_P(Determinism, RepeatedRunsAreBitIdentical) {
  const auto& [dev, c] = GetParam();
  if (!device_usable(dev)) GTEST_SKIP() << "no usable device";
  Instance in = make_instance(dev, c, true);
  const flashattn::Status probe = flashattn::forward(in.fwd_args());
  if (skip_if_unsupported(dev, probe)) GTEST_SKIP() << probe.message;
  const Outputs a = run(in), b = run(in), cc = run(in);
  expect_same(a, b, true);
  expect_same(a, cc, true);
}

TEST_P(Determinism, IndependentOfThreadCount) {
  const auto& [dev, c] = GetParam();
  if (dev != Device::CPU) GTEST_SKIP() << "OpenMP thread counts only steer the CPU backend";
  Instance in = make_instance(dev, c, true);
  const int saved = omp_get_max_threads();
  omp_set_num_threads(1);
  const Outputs one = run(in);
  omp_set_num_threads(2);
  const Outputs two = run(in);
  omp_set_num_threads(3);  // uneven split of the work
  const Outputs three = run(in);
  omp_set_num_threads(saved);
  expect_same(one, two, true);
  expect_same(one, three, true);
}

// Without deterministic the forward must still be reproducible.
TEST_P(Determinism, ForwardReproducibleWithoutDeterministicFlag) {
  auto [dev, c] = GetParam();
  if (!device_usable(dev)) GTEST_SKIP() << "no usable device";
  c.deterministic = false;
  Instance in = make_instance(dev, c, true);
  const flashattn::Status probe = flashattn::forward(in.fwd_args());
  if (skip_if_unsupported(dev, probe)) GTEST_SKIP() << probe.message;
  expect_same(run(in), run(in), false);
}

// Calls from several host threads at once (each with its own OpenMP team and
// workspace) give the same bytes as the same calls made one after another.
TEST_P(Determinism, ConcurrentCallsMatchSerialCalls) {
  const auto& [dev, c] = GetParam();
  if (dev != Device::CPU) GTEST_SKIP() << "host-thread concurrency is tested on the CPU backend";
  constexpr int kThreads = 4;
  std::deque<Instance> ins;  // fresh inputs for each thread
  for (int t = 0; t < kThreads; ++t) ins.push_back(make_instance(dev, c, true));
  std::vector<Outputs> serial, parallel(kThreads);
  for (const Instance& in : ins) serial.push_back(run(in));
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) threads.emplace_back([&, t] { parallel[t] = run(ins[t]); });
  for (std::thread& th : threads) th.join();
  for (int t = 0; t < kThreads; ++t) expect_same(serial[t], parallel[t], true);
  EXPECT_FALSE(serial[0].out == serial[1].out) << "the threads' inputs should differ";
}

INSTANTIATE_TEST_SUITE_P(Sweep, Determinism,
                         ::testing::Combine(::testing::ValuesIn(test_devices()),
                                            ::testing::ValuesIn(det_cases())),
                         device_case_name);

}  // namespace
}  // namespace fa_test
