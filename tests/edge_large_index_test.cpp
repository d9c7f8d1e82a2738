// Sizes beyond 32-bit indexing, on the backend of this binary.
//
// Works: a batch stride of 2^31 + 4096 elements puts batch 1 of q, k, v and
// out beyond element 2^31 (byte 2^32 in fp16), so any int32 offset on the way
// wraps; the tensors touch only ~40 KB each inside a 4.3 GB span (CPU: an
// anonymous MAP_NORESERVE mapping, so untouched pages cost nothing; CUDA:
// 2 x 4.3 GB of device memory). Both batches are compared with the fp64
// reference under the rule.
// Refused: shapes or strides beyond the API's 2^48-element limit, and
// sequences of 2^31 positions or more (src/api/checks.cpp), fail with a
// message naming the tensor, before any data is touched (fake pointers here
// would crash the test if dereferenced).
#include <gtest/gtest.h>

#include <sys/mman.h>

#include <cmath>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "reference/naive_same_dtype.hpp"
#include "reference/reference.hpp"
#include "support/check.hpp"
#include "support/half.hpp"
#include "support/harness.hpp"

#ifdef FA_TEST_ON_CUDA
#include <cuda_runtime.h>
#endif

namespace fa_test {
namespace {

// A large block of memory of which only small parts are written and read.
class BigMem {
 public:
  BigMem(Device dev, size_t bytes) : dev_(dev), bytes_(bytes) {
    if (dev == Device::CPU) {
      void* p = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
      p_ = p == MAP_FAILED ? nullptr : p;
    } else {
#ifdef FA_TEST_ON_CUDA
      if (cudaMalloc(&p_, bytes) != cudaSuccess) p_ = nullptr;
#endif
    }
  }
  ~BigMem() {
    if (!p_) return;
    if (dev_ == Device::CPU) {
      munmap(p_, bytes_);
    } else {
#ifdef FA_TEST_ON_CUDA
      cudaFree(p_);
#endif
    }
  }
  uint8_t* data() const { return static_cast<uint8_t*>(p_); }
  void put(size_t off, const void* src, size_t n) {
    if (dev_ == Device::CPU) {
      std::memcpy(data() + off, src, n);
    } else {
#ifdef FA_TEST_ON_CUDA
      ASSERT_EQ(cudaMemcpy(data() + off, src, n, cudaMemcpyHostToDevice), cudaSuccess);
#endif
    }
  }
  void get(size_t off, void* dst, size_t n) {
    if (dev_ == Device::CPU) {
      std::memcpy(dst, data() + off, n);
    } else {
#ifdef FA_TEST_ON_CUDA
      ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
      ASSERT_EQ(cudaMemcpy(dst, data() + off, n, cudaMemcpyDeviceToHost), cudaSuccess);
#endif
    }
  }

 private:
  Device dev_;
  size_t bytes_;
  void* p_ = nullptr;
};

class Edge32Bit : public ::testing::TestWithParam<Device> {};

TEST_P(Edge32Bit, ForwardWithOffsetsBeyond2To31Elements) {
  const Device dev = GetParam();
  if (!device_usable(dev)) GTEST_SKIP() << "no usable device";
  constexpr int64_t B = 2, S = 77, Hq = 2, Hkv = 1, D = 64;
  constexpr int64_t kBatchStride = (int64_t(1) << 31) + 4096;  // elements
  constexpr int64_t kOffK = 20000, kOffV = 40000;                // q at 0
  const size_t in_bytes = size_t(kBatchStride + 60000) * 2, out_bytes = size_t(kBatchStride + 20000) * 2;
  BigMem in(dev, in_bytes), out(dev, out_bytes);
  if (!in.data() || !out.data()) GTEST_SKIP() << "could not reserve 2 x 4.3 GB of address space / memory";

  // Dense fp16 values per tensor, [B, S, H, D], and their rows written at the
  // strided offsets.
  std::mt19937 rng(1234);
  std::normal_distribution<float> nd(0.0f, 1.0f);
  auto make = [&](int64_t H, int64_t base) {
    std::vector<double> dense(size_t(B * S * H * D));
    std::vector<uint16_t> row(static_cast<size_t>(D));
    for (int64_t b = 0; b < B; ++b)
      for (int64_t s = 0; s < S; ++s)
        for (int64_t h = 0; h < H; ++h) {
          for (int64_t d = 0; d < D; ++d) {
            row[size_t(d)] = float_to_half(nd(rng));
            dense[size_t(((b * S + s) * H + h) * D + d)] = half_to_float(row[size_t(d)]);
          }
          const int64_t off = base + b * kBatchStride + s * H * D + h * D;
          in.put(size_t(off) * 2, row.data(), size_t(D) * 2);
        }
    return dense;
  };
  const std::vector<double> q = make(Hq, 0), k = make(Hkv, kOffK), v = make(Hkv, kOffV);
  if (HasFatalFailure()) return;

  auto view = [&](uint8_t* base, int64_t off, int64_t H) {
    flashattn::TensorView t;
    t.data = base + off * 2;
    t.dtype = DType::F16;
    t.device = dev;
    t.ndim = 4;
    const int64_t shape[4] = {B, S, H, D}, stride[4] = {kBatchStride, H * D, D, 1};
    for (int i = 0; i < 4; ++i) {
      t.shape[i] = shape[i];
      t.stride[i] = stride[i];
    }
    return t;
  };
  Tensor lse = make_lse(dev, B, Hq, S);
  flashattn::ForwardArgs a;
  a.q = view(in.data(), 0, Hq);
  a.k = view(in.data(), kOffK, Hkv);
  a.v = view(in.data(), kOffV, Hkv);
  a.out = view(out.data(), 0, Hq);
  a.lse = lse.view();
  a.options.causal = true;
  const flashattn::Status st = flashattn::forward(a);
  if (skip_if_unsupported(dev, st)) GTEST_SKIP() << st.message;
  ASSERT_TRUE(st.ok()) << st.message;

  std::vector<double> got(q.size());
  std::vector<uint16_t> row(static_cast<size_t>(D));
  for (int64_t b = 0; b < B; ++b)
    for (int64_t s = 0; s < S; ++s)
      for (int64_t h = 0; h < Hq; ++h) {
        out.get(size_t(b * kBatchStride + s * Hq * D + h * D) * 2, row.data(), size_t(D) * 2);
        for (int64_t d = 0; d < D; ++d) got[size_t(((b * S + s) * Hq + h) * D + d)] = half_to_float(row[size_t(d)]);
      }
  flashattn::reference::Problem p;
  p.batch = B;
  p.seqlen_q = p.seqlen_k = S;
  p.heads_q = Hq;
  p.heads_kv = Hkv;
  p.head_dim = D;
  p.causal = true;
  std::vector<double> ref(q.size()), ref_lse(size_t(B * Hq * S)), naive, naive_lse;
  flashattn::reference::forward(p, q.data(), k.data(), v.data(), ref.data(), ref_lse.data());
  flashattn::reference::naive_forward(p, DType::F16, q, k, v, &naive, &naive_lse);
  double vmax = 0;
  for (double x : v) vmax = std::max(vmax, std::fabs(x));
  EXPECT_TRUE(within_rule("out (batch 1 beyond element 2^31)", DType::F16, got, ref, naive, S, D, vmax));
  EXPECT_TRUE(lse_within_rule("lse", lse.read(), ref_lse, naive_lse, D));
}

// Shapes and strides past the 2^48-element limit: refused before any access.
TEST_P(Edge32Bit, BeyondTheSizeLimitIsRefusedUntouched) {
  const Device dev = GetParam();
  void* fake = reinterpret_cast<void*>(uintptr_t(1) << 20);  // never mapped: a touch would crash
  auto t4 = [&](int64_t B, int64_t S, int64_t H, int64_t D, int64_t sb) {
    flashattn::TensorView t;
    t.data = fake;
    t.dtype = DType::F16;
    t.device = dev;
    t.ndim = 4;
    const int64_t shape[4] = {B, S, H, D}, stride[4] = {sb, H * D, D, 1};
    for (int i = 0; i < 4; ++i) {
      t.shape[i] = shape[i];
      t.stride[i] = stride[i];
    }
    return t;
  };
  struct Bad {
    const char* what;
    int64_t B, S, H, sb;
  };
  const int64_t k2_40 = int64_t(1) << 40;
  const Bad bads[] = {
      {"seqlen 2^49", 1, int64_t(1) << 49, 1, (int64_t(1) << 49) * 64},
      {"2^49 elements", int64_t(1) << 17, k2_40, 1, k2_40 * 64},          // 2^17 * 2^40 * 64 overflows int64
      {"batch stride 2^48", 2, 16, 1, int64_t(1) << 48},
      {"batch stride overflowing int64", 3, 16, 1, INT64_MAX / 2},
  };
  for (const Bad& b : bads) {
    flashattn::ForwardArgs a;
    a.q = t4(b.B, b.S, b.H, 64, b.sb);
    a.k = a.q;
    a.v = a.q;
    a.out = t4(b.B, b.S, b.H, 64, b.sb);
    a.out.data = reinterpret_cast<void*>(uintptr_t(1) << 62);
    const flashattn::Status st = flashattn::forward(a);
    EXPECT_EQ(st.code, flashattn::ErrorCode::InvalidArgument) << b.what;
    EXPECT_NE(st.message.find("2^48"), std::string::npos) << b.what << ": " << st.message;
    EXPECT_EQ(st.message.rfind("q:", 0), 0u) << b.what << ": the message names q: " << st.message;
    size_t ws = 0;
    EXPECT_FALSE(flashattn::forward_workspace_bytes(a, &ws).ok()) << b.what;
  }
  // A sequence of 2^31 positions (2^37 elements: within the size limit) is
  // refused too: positions inside a sequence are int32 in the kernels.
  flashattn::ForwardArgs a;
  a.q = t4(1, int64_t(1) << 31, 1, 64, (int64_t(1) << 31) * 64);
  a.k = a.q;
  a.v = a.q;
  a.out = a.q;
  a.out.data = reinterpret_cast<void*>(uintptr_t(1) << 62);
  const flashattn::Status st = flashattn::forward(a);
  EXPECT_EQ(st.code, flashattn::ErrorCode::InvalidArgument);
  EXPECT_NE(st.message.find("2^31"), std::string::npos) << st.message;
}

INSTANTIATE_TEST_SUITE_P(Edge, Edge32Bit, ::testing::ValuesIn(test_devices()),
                         [](const ::testing::TestParamInfo<Device>& i) { return std::string(device_name(i.param)); });

}  // namespace
}  // namespace fa_test
