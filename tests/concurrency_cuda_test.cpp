// Concurrency on CUDA (gpu binary only, label gpu): several host threads, each
// with its own non-blocking CUDA stream, run forward + deterministic backward
// at the same time (several rounds, so the calls overlap on the device); every
// output must equal, byte for byte, the same call made alone on the default
// stream. Catches shared mutable state in the backend (workspace, cached
// launch configuration, device/context switching) and missing stream
// ordering (work or workspace frees issued on the wrong stream).
#include <gtest/gtest.h>

#include <cuda_runtime.h>

#include <deque>
#include <string>
#include <thread>
#include <vector>

#include "support/harness.hpp"

namespace fa_test {
namespace {

struct Outputs {
  std::vector<uint8_t> out, lse, dq, dk, dv;
  bool operator==(const Outputs& o) const {
    return out == o.out && lse == o.lse && dq == o.dq && dk == o.dk && dv == o.dv;
  }
};

// Forward then backward on `stream`; the host copies wait for the device.
Outputs run_on(const Instance& in, cudaStream_t stream, flashattn::Status* st) {
  flashattn::ForwardArgs f = in.fwd_args();
  f.options.stream = stream;
  *st = flashattn::forward(f);
  if (st->ok()) {
    flashattn::BackwardArgs b = in.bwd_args();
    b.options.stream = stream;
    *st = flashattn::backward(b);
  }
  if (stream != nullptr) cudaStreamSynchronize(stream);
  return {in.out.buf->to_host(), in.lse.buf->to_host(), in.grad.q.buf->to_host(),
          in.grad.k.buf->to_host(), in.grad.v.buf->to_host()};
}

std::vector<Case> cases() {
  Case a;
  a.dtype = DType::F16;
  a.batch = 2;
  a.seqlen_q = a.seqlen_k = 300;
  a.heads_q = 8;
  a.heads_kv = 2;
  a.head_dim = 64;
  a.causal = true;
  a.deterministic = true;
  Case b = a;
  b.dtype = DType::BF16;
  b.seqlen_q = 77;
  b.seqlen_k = 513;
  b.heads_q = b.heads_kv = 4;
  b.causal = false;
  b.window_left = 100;
  return {a, b};
}

TEST(ConcurrencyCuda, StreamsFromHostThreadsMatchSerialCalls) {
  if (!device_usable(Device::CUDA)) GTEST_SKIP() << "no usable CUDA device";
  constexpr int kThreads = 4, kRounds = 3;
  const std::vector<Case> cs = cases();
  std::deque<Instance> ins;  // fresh random inputs per thread
  for (int t = 0; t < kThreads; ++t) ins.push_back(make_instance(Device::CUDA, cs[size_t(t) % cs.size()], true));

  std::vector<Outputs> serial;
  for (const Instance& in : ins) {
    flashattn::Status st;
    serial.push_back(run_on(in, nullptr, &st));
    if (skip_if_unsupported(Device::CUDA, st)) GTEST_SKIP() << st.message;
    ASSERT_TRUE(st.ok()) << st.message;
  }

  std::vector<std::vector<Outputs>> got(kThreads, std::vector<Outputs>(kRounds));
  std::vector<flashattn::Status> status(kThreads);
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      cudaStream_t s = nullptr;
      if (cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking) != cudaSuccess) {
        status[size_t(t)] = flashattn::Status::Error(flashattn::ErrorCode::CudaError, "stream create");
        return;
      }
      for (int r = 0; r < kRounds && status[size_t(t)].ok(); ++r)
        got[size_t(t)][size_t(r)] = run_on(ins[size_t(t)], s, &status[size_t(t)]);
      cudaStreamDestroy(s);
    });
  }
  for (std::thread& th : threads) th.join();
  for (int t = 0; t < kThreads; ++t) {
    ASSERT_TRUE(status[size_t(t)].ok()) << "thread " << t << ": " << status[size_t(t)].message;
    for (int r = 0; r < kRounds; ++r)
      EXPECT_TRUE(got[size_t(t)][size_t(r)] == serial[size_t(t)])
          << "thread " << t << " round " << r << " differs from the serial call";
  }
  EXPECT_FALSE(serial[0].out == serial[2].out) << "the threads' inputs should differ";
}

}  // namespace
}  // namespace fa_test
