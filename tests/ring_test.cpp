// Ring attention (flashattn/ring.hpp) with P = 1, 2, 4 ranks simulated by
// threads over the in-process transport (CPU tensors; in the GPU binary,
// CUDA tensors on one GPU, a stream per rank), against one-device attention (the
// fp64 reference and naive_same_dtype) under DESIGN.md's rule, forward and
// backward; the LSE merge on its own against the reference; bad arguments.
#include <gtest/gtest.h>
#include <omp.h>

#ifdef FA_TEST_ON_CUDA
#include <cuda_runtime_api.h>
#endif

#include <algorithm>
#include <cmath>
#include <limits>
#include <ostream>
#include <string>
#include <thread>
#include <vector>

#include "flashattn/ring.hpp"
#include "reference/reference.hpp"
#include "support/check.hpp"
#include "support/harness.hpp"
#include "support/rng.hpp"
#include "support/tensor.hpp"

namespace {

using flashattn::DType;
using flashattn::Device;
using flashattn::Status;
using fa_test::Layout;
using fa_test::Tensor;

// Global positions of rank r's tokens: the zig-zag chunks r and 2P-1-r
// (causal), or an uneven contiguous split where rank r's share grows with r.
std::vector<int64_t> positions(int64_t total, int P, int r, bool zigzag) {
  std::vector<int64_t> pos;
  if (zigzag) {
    const std::vector<int64_t> c = flashattn::ring::zigzag_chunk_sizes(total, P);
    std::vector<int64_t> start(c.size() + 1, 0);
    for (size_t i = 0; i < c.size(); ++i) start[i + 1] = start[i] + c[i];
    for (int chunk : {r, 2 * P - 1 - r}) {
      for (int64_t s = start[size_t(chunk)]; s < start[size_t(chunk) + 1]; ++s) pos.push_back(s);
    }
    return pos;
  }
  const int64_t wsum = int64_t(P) * (P + 1) / 2, before = int64_t(r) * (r + 1) / 2;
  for (int64_t s = total * before / wsum; s < total * (before + r + 1) / wsum; ++s) pos.push_back(s);
  return pos;
}

// Rows `pos` of a dense [B, S, H, D] array (or [B, H, S] when lse), and back.
std::vector<double> gather(const std::vector<double>& x, int64_t B, int64_t S, int64_t H, int64_t D,
                           const std::vector<int64_t>& pos, bool lse = false) {
  std::vector<double> y;
  const int64_t n = int64_t(pos.size());
  y.reserve(size_t(B * n * H * D));
  for (int64_t b = 0; b < B; ++b) {
    if (lse) {
      for (int64_t h = 0; h < H; ++h)
        for (int64_t s : pos) y.push_back(x[size_t((b * H + h) * S + s)]);
    } else {
      for (int64_t s : pos)
        for (int64_t i = 0; i < H * D; ++i) y.push_back(x[size_t((b * S + s) * H * D + i)]);
    }
  }
  return y;
}

void scatter(const std::vector<double>& y, std::vector<double>* x, int64_t B, int64_t S, int64_t H,
             int64_t D, const std::vector<int64_t>& pos, bool lse = false) {
  size_t k = 0;
  for (int64_t b = 0; b < B; ++b) {
    if (lse) {
      for (int64_t h = 0; h < H; ++h)
        for (int64_t s : pos) (*x)[size_t((b * H + h) * S + s)] = y[k++];
    } else {
      for (int64_t s : pos)
        for (int64_t i = 0; i < H * D; ++i) (*x)[size_t((b * S + s) * H * D + i)] = y[k++];
    }
  }
}

struct RingCase {
  fa_test::Case c;
  int world = 1;
  Layout layout = Layout::BSHD;  // of the local tensors
};

void PrintTo(const RingCase& rc, std::ostream* os) {
  *os << "P=" << rc.world << " " << rc.c.name() << " " << fa_test::layout_name(rc.layout);
}

std::string ring_case_name(const ::testing::TestParamInfo<RingCase>& info) {
  return "P" + std::to_string(info.param.world) + "_" + info.param.c.name() + "_" +
         fa_test::layout_name(info.param.layout);
}

// One rank's local tensors.
struct Rank {
  std::vector<int64_t> qpos, kpos;
  Tensor q, k, v, out, lse, dout, dq, dk, dv;
};

class Ring : public ::testing::TestWithParam<RingCase> {};

TEST_P(Ring, MatchesOneDevice) {
  const RingCase rc = GetParam();
  const fa_test::Case& c = rc.c;
  const Device dev = fa_test::test_devices().front();
  const int P = rc.world;
  const int64_t B = c.batch, Hq = c.heads_q, Hkv = c.heads_kv, D = c.head_dim;
  // The whole problem on "one device": fresh random inputs, the reference,
  // naive_same_dtype, and the rule's magnitudes.
  fa_test::Instance whole = fa_test::make_instance(dev, c, /*backward=*/true);
  const fa_test::Expected e = fa_test::expected_forward(whole);
  const fa_test::ExpectedGrads g = fa_test::expected_backward(whole);
  const fa_test::Magnitudes m = fa_test::magnitudes(whole);

  std::vector<Rank> ranks(static_cast<size_t>(P));
  std::vector<int64_t> seqlens_k;
  for (int r = 0; r < P; ++r) {
    Rank& x = ranks[size_t(r)];
    // Non-causal: queries and keys split differently (the keys' shares reversed).
    x.qpos = positions(c.seqlen_q, P, r, c.causal);
    x.kpos = positions(c.seqlen_k, P, c.causal ? r : P - 1 - r, c.causal);
    const int64_t sq = int64_t(x.qpos.size()), sk = int64_t(x.kpos.size());
    seqlens_k.push_back(sk);
    auto make = [&](int64_t s, int64_t h) {
      return fa_test::make_bshd(dev, c.dtype, rc.layout, B, s, h, D);
    };
    x.q = make(sq, Hq);
    x.k = make(sk, Hkv);
    x.v = make(sk, Hkv);
    x.dout = make(sq, Hq);
    x.out = make(sq, Hq);
    x.dq = make(sq, Hq);
    x.dk = make(sk, Hkv);
    x.dv = make(sk, Hkv);
    x.lse = fa_test::make_lse(dev, B, Hq, sq);
    x.q.write(gather(whole.q, B, c.seqlen_q, Hq, D, x.qpos));
    x.k.write(gather(whole.k, B, c.seqlen_k, Hkv, D, x.kpos));
    x.v.write(gather(whole.v, B, c.seqlen_k, Hkv, D, x.kpos));
    x.dout.write(gather(whole.dO, B, c.seqlen_q, Hq, D, x.qpos));
    // Poison the outputs: an element the ring forgets to write fails the rule.
    const double nan = std::numeric_limits<double>::quiet_NaN();
    for (const Tensor* t : {&x.out, &x.dq, &x.dk, &x.dv, &x.lse}) {
      t->write(std::vector<double>(size_t(t->numel()), nan));
    }
  }

  std::vector<void*> streams(static_cast<size_t>(P), nullptr);
  std::vector<std::unique_ptr<flashattn::ring::Transport>> transports;
#ifdef FA_TEST_ON_CUDA
  for (auto& s : streams) {
    cudaStream_t st = nullptr;
    ASSERT_EQ(cudaStreamCreateWithFlags(&st, cudaStreamNonBlocking), cudaSuccess);
    s = st;
  }
  transports = flashattn::ring::make_local_cuda_ring(0, streams, /*timeout_ms=*/60000);
#else
  transports = flashattn::ring::make_local_ring(P, /*timeout_ms=*/60000);
#endif
  std::vector<Status> fwd(static_cast<size_t>(P)), bwd(static_cast<size_t>(P));
  std::vector<std::thread> threads;
  for (int r = 0; r < P; ++r) {
    threads.emplace_back([&, r] {
      omp_set_num_threads(1);  // P ranks share the CI's two cores
      Rank& x = ranks[size_t(r)];
      flashattn::ring::RingForwardArgs fa;
      fa.q = x.q.view();
      fa.k = x.k.view();
      fa.v = x.v.view();
      fa.out = x.out.view();
      fa.lse = x.lse.view();
      fa.seqlens_k = seqlens_k;
      fa.options = c.options();
      fa.options.stream = streams[size_t(r)];
      fwd[size_t(r)] = flashattn::ring::ring_forward(fa, *transports[size_t(r)]);
      if (!fwd[size_t(r)].ok()) return;  // every rank fails alike (checks precede transfers)
      flashattn::ring::RingBackwardArgs ba;
      ba.q = x.q.view();
      ba.k = x.k.view();
      ba.v = x.v.view();
      ba.out = x.out.view();
      ba.dout = x.dout.view();
      ba.lse = x.lse.view();
      ba.dq = x.dq.view();
      ba.dk = x.dk.view();
      ba.dv = x.dv.view();
      ba.seqlens_k = seqlens_k;
      ba.options = c.options();
      ba.options.stream = streams[size_t(r)];
      bwd[size_t(r)] = flashattn::ring::ring_backward(ba, *transports[size_t(r)]);
    });
  }
  for (auto& t : threads) t.join();
#ifdef FA_TEST_ON_CUDA
  for (void* s : streams) {
    EXPECT_EQ(cudaStreamSynchronize(static_cast<cudaStream_t>(s)), cudaSuccess);
    cudaStreamDestroy(static_cast<cudaStream_t>(s));
  }
#endif
  // The CUDA backend covers a subset (fp16/bf16): the ring reports it alike on every rank.
  if (fa_test::skip_if_unsupported(dev, fwd[0])) GTEST_SKIP() << fwd[0].message;
  for (int r = 0; r < P; ++r) {
    ASSERT_TRUE(fwd[size_t(r)].ok()) << "rank " << r << " forward: " << fwd[size_t(r)].message;
    ASSERT_TRUE(bwd[size_t(r)].ok()) << "rank " << r << " backward: " << bwd[size_t(r)].message;
  }

  std::vector<double> out(e.out.size()), lse(e.lse.size()), dq(g.dq.size()), dk(g.dk.size()),
      dv(g.dv.size());
  for (const Rank& x : ranks) {
    scatter(x.out.read(), &out, B, c.seqlen_q, Hq, D, x.qpos);
    scatter(x.lse.read(), &lse, B, c.seqlen_q, Hq, 1, x.qpos, /*lse=*/true);
    scatter(x.dq.read(), &dq, B, c.seqlen_q, Hq, D, x.qpos);
    scatter(x.dk.read(), &dk, B, c.seqlen_k, Hkv, D, x.kpos);
    scatter(x.dv.read(), &dv, B, c.seqlen_k, Hkv, D, x.kpos);
  }
  const int64_t col_len = std::max(c.seqlen_k, c.seqlen_q * (Hq / Hkv));
  EXPECT_TRUE(fa_test::within_rule("out", c.dtype, out, e.out, e.naive_out, c.seqlen_k, D, m.out));
  EXPECT_TRUE(fa_test::lse_within_rule("lse", lse, e.lse, e.naive_lse, D));
  EXPECT_TRUE(fa_test::within_rule("dq", c.dtype, dq, g.dq, g.naive_dq, c.seqlen_k, D, m.dq));
  EXPECT_TRUE(fa_test::within_rule("dk", c.dtype, dk, g.dk, g.naive_dk, col_len, D, m.dk));
  EXPECT_TRUE(fa_test::within_rule("dv", c.dtype, dv, g.dv, g.naive_dv, col_len, D, m.dv));
}

std::vector<RingCase> ring_cases() {
  auto mk = [](DType dt, int64_t b, int64_t sq, int64_t sk, int64_t hq, int64_t hkv, int64_t d,
               bool causal) {
    fa_test::Case c;
    c.dtype = dt;
    c.batch = b;
    c.seqlen_q = sq;
    c.seqlen_k = sk;
    c.heads_q = hq;
    c.heads_kv = hkv;
    c.head_dim = d;
    c.causal = causal;
    return c;
  };
  std::vector<fa_test::Case> cases = {
      mk(DType::F32, 2, 67, 67, 4, 2, 32, true),     // odd length, uneven zig-zag chunks, GQA
      mk(DType::F32, 1, 9, 9, 2, 1, 8, true),        // P = 4: chunks of 2 and 1 tokens
      mk(DType::F32, 1, 41, 75, 3, 1, 24, false),    // Sq != Sk, MQA, q and k split differently
      mk(DType::BF16, 1, 131, 131, 4, 2, 64, true),  // bf16 causal GQA
      mk(DType::F16, 2, 97, 113, 2, 2, 40, false),   // fp16, softmax_scale given (below)
  };
  cases.back().scale = 0.3f;
  std::vector<RingCase> out;
  for (int P : {1, 2, 4}) {
    for (const auto& c : cases) {
      // BHSD locals (strided views) for one case per P: the ring copies
      // its K/V into contiguous messages and writes outputs through strides.
      const Layout l = (&c == &cases[2]) ? Layout::BHSD : Layout::BSHD;
      out.push_back({c, P, l});
    }
  }
  return out;
}

INSTANTIATE_TEST_SUITE_P(Sim, Ring, ::testing::ValuesIn(ring_cases()), ring_case_name);

// ---- the merge rule on its own ----------------------------------------------

// Attention over keys [0, c) merged with attention over [c, Sk) equals the
// attention over all keys. Causal with Sq > Sk: the first Sq - Sk rows see
// no key at all (both parts -inf), rows near the split see one part only.
TEST(RingMerge, PartsEqualWhole) {
  for (bool causal : {false, true}) {
    namespace ref = flashattn::reference;
    const int64_t B = 2, H = 3, D = 16, Sq = causal ? 37 : 23, Sk = causal ? 23 : 37, cut = 9;
    ref::Problem whole;
    whole.batch = B;
    whole.seqlen_q = Sq;
    whole.seqlen_k = Sk;
    whole.heads_q = whole.heads_kv = H;
    whole.head_dim = D;
    whole.causal = causal;
    std::vector<double> q = fa_test::randn(size_t(B * Sq * H * D), fa_test::next_seed());
    std::vector<double> k = fa_test::randn(size_t(B * Sk * H * D), fa_test::next_seed());
    std::vector<double> v = fa_test::randn(size_t(B * Sk * H * D), fa_test::next_seed());
    std::vector<double> out(size_t(B * Sq * H * D)), lse(size_t(B * H * Sq));
    ref::forward(whole, q.data(), k.data(), v.data(), out.data(), lse.data());

    // Part 1: keys [0, cut), the global diagonal expressed as a right window
    // (Sk - cut past the part's own bottom-right diagonal). Part 2: keys
    // [cut, Sk), whose bottom-right diagonal is the global one.
    std::vector<int64_t> k1, k2;
    for (int64_t s = 0; s < Sk; ++s) (s < cut ? k1 : k2).push_back(s);
    Tensor acc = fa_test::make_contiguous(Device::CPU, DType::F32, {B, Sq, H, D});
    Tensor acc_lse = fa_test::make_lse(Device::CPU, B, H, Sq);
    acc.write(std::vector<double>(size_t(acc.numel()), 0.0));
    acc_lse.write(std::vector<double>(size_t(acc_lse.numel()), -INFINITY));
    for (int part = 0; part < 2; ++part) {
      const std::vector<int64_t>& keys = part == 0 ? k1 : k2;
      ref::Problem p = whole;
      p.seqlen_k = int64_t(keys.size());
      if (part == 0 && causal) {
        p.causal = false;
        p.window_right = Sk - cut;
      }
      const std::vector<double> pk = gather(k, B, Sk, H, D, keys), pv = gather(v, B, Sk, H, D, keys);
      std::vector<double> po(out.size()), pl(lse.size());
      ref::forward(p, q.data(), pk.data(), pv.data(), po.data(), pl.data());
      Tensor t_po = fa_test::make_contiguous(Device::CPU, DType::F32, {B, Sq, H, D});
      Tensor t_pl = fa_test::make_lse(Device::CPU, B, H, Sq);
      t_po.write(po);
      t_pl.write(pl);
      const Status st =
          flashattn::ring::merge_partial(acc.view(), acc_lse.view(), t_po.view(), t_pl.view());
      ASSERT_TRUE(st.ok()) << st.message;
    }
    const std::vector<double> got_lse = acc_lse.read();
    if (causal) EXPECT_TRUE(std::isinf(lse[0]) && lse[0] < 0) << "the case must have empty rows";
    EXPECT_TRUE(fa_test::within_rule(std::string("merged out") + (causal ? " causal" : ""),
                                     DType::F32, acc.read(), out, {}, Sk, D, 0.0));
    EXPECT_TRUE(fa_test::lse_within_rule("merged lse", got_lse, lse, {}, D));
  }
}

TEST(RingMerge, BadArgumentsNamed) {
  Tensor acc = fa_test::make_contiguous(Device::CPU, DType::F32, {1, 4, 2, 8});
  Tensor lse = fa_test::make_lse(Device::CPU, 1, 2, 4);
  Tensor part16 = fa_test::make_contiguous(Device::CPU, DType::F16, {1, 4, 2, 8});
  Tensor wrong = fa_test::make_lse(Device::CPU, 1, 2, 5);
  Status st = flashattn::ring::merge_partial(acc.view(), lse.view(), part16.view(), wrong.view());
  EXPECT_EQ(st.code, flashattn::ErrorCode::InvalidArgument);
  EXPECT_NE(st.message.find("part_lse"), std::string::npos) << st.message;
  st = flashattn::ring::merge_partial(part16.view(), lse.view(), acc.view(), lse.view());
  EXPECT_NE(st.message.find("out_acc: expected float32"), std::string::npos) << st.message;
}

// ---- bad ring arguments: found before any transfer, outputs untouched ---------

// A transport that moves device memory: the ring must refuse host tensors.
class DeviceOnlyTransport final : public flashattn::ring::Transport {
 public:
  int rank() const noexcept override { return 0; }
  int world_size() const noexcept override { return 1; }
  Device device() const noexcept override { return Device::CUDA; }
  Status start_exchange(const void*, size_t, void*, size_t, int,
                        std::unique_ptr<flashattn::ring::Pending>*) noexcept override {
    return Status::Error(flashattn::ErrorCode::Internal, "no transfer expected");
  }
};

// Runs ring_forward once on fresh [1, 5, 2, D] CPU inputs of dtype `in_dt`
// (output `out_dt`) through `transport` and checks that it is refused with
// `code`, a message holding `needle`, and nothing written.
// Dv: v's (and out's) head dim, 0 = D.
void expect_refused(DType in_dt, DType out_dt, int64_t D, flashattn::ring::Transport& transport,
                    flashattn::ErrorCode code, const std::string& needle, int64_t Dv = 0) {
  fa_test::QKV in = fa_test::make_qkv(Device::CPU, in_dt, Layout::BSHD, 1, 5, 5, 2, 2, D, Dv);
  fa_test::fill_randn(in.q);
  fa_test::fill_randn(in.k);
  fa_test::fill_randn(in.v);
  Tensor out = fa_test::make_contiguous(Device::CPU, out_dt, {1, 5, 2, Dv > 0 ? Dv : D});
  fa_test::CallGuard guard({&in.q, &in.k, &in.v}, {&out});
  flashattn::ring::RingForwardArgs a;
  a.q = in.q.view();
  a.k = in.k.view();
  a.v = in.v.view();
  a.out = out.view();
  a.seqlens_k = {5};
  const Status st = flashattn::ring::ring_forward(a, transport);
  EXPECT_EQ(st.code, code) << st.message;
  EXPECT_NE(st.message.find(needle), std::string::npos) << st.message;
  EXPECT_TRUE(guard.untouched());
}

TEST(RingArgs, TransportOnAnotherDeviceIsRefused) {
  DeviceOnlyTransport t;
  expect_refused(DType::F32, DType::F32, 8, t, flashattn::ErrorCode::InvalidArgument,
                 "transport: moves CUDA memory");
}

TEST(RingArgs, Fp8InputsAreRefused) {
  auto transports = flashattn::ring::make_local_ring(1, 5000);
  expect_refused(DType::F8E4M3, DType::BF16, 128, *transports[0], flashattn::ErrorCode::Unsupported,
                 "float8_e4m3");
}

// The ring's chunks and partial outputs have one head dim; forward() takes two.
TEST(RingArgs, VHeadDimOfItsOwnIsRefused) {
  auto transports = flashattn::ring::make_local_ring(1, 5000);
  expect_refused(DType::F32, DType::F32, 16, *transports[0], flashattn::ErrorCode::Unsupported,
                 "v: the ring needs v's head_dim equal to q's", 8);
}

TEST(RingArgs, ErrorsNameTheArgumentAndWriteNothing) {
  const int P = 2;
  const int64_t B = 1, S = 6, H = 2, D = 8;
  struct Bad {
    const char* what;
    std::vector<int64_t> seqlens;
    bool causal;
    int64_t window_left;
    flashattn::ErrorCode code;
    const char* needle;
  };
  const std::vector<Bad> bad = {
      {"one length", {S}, false, -1, flashattn::ErrorCode::InvalidArgument, "seqlens_k: expected one length per rank"},
      {"own length", {S + 1, S + 1}, false, -1, flashattn::ErrorCode::InvalidArgument, "seqlens_k: entry"},
      {"not zig-zag", {S, S + 2}, true, -1, flashattn::ErrorCode::InvalidArgument, "zig-zag layout"},
      {"window", {S, S}, false, 3, flashattn::ErrorCode::Unsupported, "options:"},
  };
  for (const Bad& b : bad) {
    auto transports = flashattn::ring::make_local_ring(P, 5000);
    std::vector<Status> st(P);
    std::vector<std::thread> threads;
    for (int r = 0; r < P; ++r) {
      threads.emplace_back([&, r] {
        // The tensors' real lengths: S, except where the zig-zag check is the point.
        const int64_t sk = b.causal ? b.seqlens[size_t(r)] : S;
        fa_test::QKV in = fa_test::make_qkv(Device::CPU, DType::F32, Layout::BSHD, B, sk, sk, H, H, D);
        fa_test::fill_randn(in.q);
        fa_test::fill_randn(in.k);
        fa_test::fill_randn(in.v);
        Tensor out = fa_test::make_contiguous(Device::CPU, DType::F32, {B, sk, H, D});
        Tensor lse = fa_test::make_lse(Device::CPU, B, H, sk);
        fa_test::CallGuard guard({&in.q, &in.k, &in.v}, {&out, &lse});
        flashattn::ring::RingForwardArgs a;
        a.q = in.q.view();
        a.k = in.k.view();
        a.v = in.v.view();
        a.out = out.view();
        a.lse = lse.view();
        a.seqlens_k = b.seqlens;
        a.options.causal = b.causal;
        a.options.window_left = b.window_left;
        st[size_t(r)] = flashattn::ring::ring_forward(a, *transports[size_t(r)]);
        EXPECT_TRUE(guard.untouched()) << b.what << ", rank " << r;
      });
    }
    for (auto& t : threads) t.join();
    for (int r = 0; r < P; ++r) {
      EXPECT_EQ(st[size_t(r)].code, b.code) << b.what << ", rank " << r << ": " << st[size_t(r)].message;
      EXPECT_NE(st[size_t(r)].message.find(b.needle), std::string::npos)
          << b.what << ", rank " << r << ": " << st[size_t(r)].message;
    }
  }
}

}  // namespace
