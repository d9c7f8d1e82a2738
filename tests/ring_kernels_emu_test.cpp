// The ring's CUDA kernels (src/ring/ring_kernels.cuh) executed on the CPU by
// src/cuda/emu, against the host ops the in-process ring tests already check
// against the reference: copies and conversions and accumulation bit for bit,
// the LSE merge within fp32 rounding (the host computes its weights in
// double), -inf rows and NaN included. Few blocks on purpose: the
// grid-stride loops must cover tensors larger than the grid.
#include "cuda_emu.hpp"  // first: the CUDA keywords for the host compiler

#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <random>
#include <vector>

#include "flashattn/ring.hpp"
#include "ring/host_tensor.hpp"
#include "ring/ring_kernels.cuh"

EMU_DEFINE_SMEM

namespace {

using flashattn::DType;
using flashattn::TensorView;
namespace k = flashattn::ring::detail::kernels;
namespace host = flashattn::ring::detail;

k::View to_view(const TensorView& t) {
  k::View v{};
  v.data = t.data;
  v.dtype = static_cast<int>(t.dtype);
  for (int i = 0; i < 4; ++i) {
    v.shape[i] = 1;
    v.stride[i] = 0;
  }
  for (int i = 0; i < t.ndim; ++i) {
    v.shape[4 - t.ndim + i] = t.shape[i];
    v.stride[4 - t.ndim + i] = t.stride[i];
  }
  return v;
}

// Storage for a [B, S, H, D] view of dtype dt, laid out [B, H, S, D] (strided, as BHSD).
struct Strided {
  std::vector<uint8_t> bytes;
  TensorView view;
  Strided(DType dt, int64_t B, int64_t S, int64_t H, int64_t D, std::mt19937& rng) {
    bytes.resize(size_t(B * S * H * D) * flashattn::dtype_size(dt));
    view = TensorView::contiguous(bytes.data(), dt, {B, S, H, D});
    view.stride[0] = H * S * D;
    view.stride[1] = D;
    view.stride[2] = S * D;
    std::normal_distribution<float> n;
    for (int64_t i = 0; i < B * S * H * D; ++i) host::store(dt, bytes.data(), i, n(rng));
  }
};

struct Dense {
  std::vector<uint8_t> bytes;
  TensorView view;
  Dense(DType dt, std::initializer_list<int64_t> shape) {
    int64_t n = 1;
    for (int64_t s : shape) n *= s;
    bytes.assign(size_t(n) * flashattn::dtype_size(dt), 0);
    view = TensorView::contiguous(bytes.data(), dt, shape);
  }
};

constexpr int64_t B = 2, S = 9, H = 3, D = 7;

TEST(RingKernelsEmu, CopyConvertAccumulateFillMatchHostBitForBit) {
  std::mt19937 rng(11);
  for (DType src_dt : {DType::F32, DType::F16, DType::BF16}) {
    for (DType dst_dt : {DType::F32, DType::F16, DType::BF16}) {
      Strided src(src_dt, B, S, H, D, rng);
      Dense a(dst_dt, {B, S, H, D}), b(dst_dt, {B, S, H, D});
      host::copy(src.view, a.view);
      emu::launch({2, 1, 1}, 32, [&] { k::elementwise_kernel(to_view(src.view), to_view(b.view), 0, 0.0f); });
      EXPECT_EQ(a.bytes, b.bytes) << "copy " << int(src_dt) << " -> " << int(dst_dt);
    }
    Strided src(src_dt, B, S, H, D, rng);
    Dense a(DType::F32, {B, S, H, D}), b(DType::F32, {B, S, H, D});
    host::fill(a.view, 0.25f);
    emu::launch({1, 1, 1}, 64, [&] { k::elementwise_kernel(to_view(b.view), to_view(b.view), 2, 0.25f); });
    EXPECT_EQ(a.bytes, b.bytes) << "fill";
    host::accumulate(src.view, a.view);
    emu::launch({3, 1, 1}, 32, [&] { k::elementwise_kernel(to_view(src.view), to_view(b.view), 1, 0.0f); });
    EXPECT_EQ(a.bytes, b.bytes) << "accumulate from dtype " << int(src_dt);
  }
}

TEST(RingKernelsEmu, MergeMatchesHostIncludingEmptyRowsAndNaN) {
  std::mt19937 rng(5);
  const float ninf = -std::numeric_limits<float>::infinity();
  for (DType part_dt : {DType::F32, DType::BF16}) {
    Strided part(part_dt, B, S, H, D, rng);
    Dense out_h(DType::F32, {B, S, H, D}), lse_h(DType::F32, {B, H, S}), plse(DType::F32, {B, H, S});
    std::normal_distribution<float> n;
    auto* o = reinterpret_cast<float*>(out_h.bytes.data());
    auto* l = reinterpret_cast<float*>(lse_h.bytes.data());
    auto* pl = reinterpret_cast<float*>(plse.bytes.data());
    for (int64_t i = 0; i < B * S * H * D; ++i) o[i] = n(rng);
    for (int64_t i = 0; i < B * H * S; ++i) {
      l[i] = 3 * n(rng);
      pl[i] = 3 * n(rng);
      // Rows with nothing seen on one side, on both sides (out must be 0
      // there, as the ring keeps it), and a NaN that must survive.
      if (i % 5 == 1) l[i] = ninf;
      if (i % 7 == 2) pl[i] = ninf;
      if (i % 11 == 3) l[i] = pl[i] = ninf;
    }
    for (int64_t b = 0; b < B; ++b)
      for (int64_t h = 0; h < H; ++h)
        for (int64_t s = 0; s < S; ++s)
          if (l[(b * H + h) * S + s] == ninf)
            for (int64_t d = 0; d < D; ++d) o[((b * S + s) * H + h) * D + d] = 0.0f;
    l[4] = std::numeric_limits<float>::quiet_NaN();
    Dense out_d = out_h, lse_d = lse_h;
    out_d.view.data = out_d.bytes.data();
    lse_d.view.data = lse_d.bytes.data();
    ASSERT_TRUE(flashattn::ring::merge_partial(out_h.view, lse_h.view, part.view, plse.view).ok());
    emu::launch({2, 1, 1}, 32, [&] {
      k::merge_kernel(to_view(out_d.view), to_view(lse_d.view), to_view(part.view), to_view(plse.view));
    });
    const auto* oh = reinterpret_cast<const float*>(out_h.bytes.data());
    const auto* od = reinterpret_cast<const float*>(out_d.bytes.data());
    const auto* lh = reinterpret_cast<const float*>(lse_h.bytes.data());
    const auto* ld = reinterpret_cast<const float*>(lse_d.bytes.data());
    EXPECT_TRUE(std::isnan(ld[4])) << "a NaN lse must stay NaN";
    for (int64_t i = 0; i < B * H * S; ++i) {
      if (i == 4) continue;
      if (std::isinf(lh[i])) {
        EXPECT_EQ(lh[i], ld[i]) << "lse row " << i;
      } else {
        EXPECT_NEAR(ld[i], lh[i], 4e-6 * std::max(1.0f, std::fabs(lh[i]))) << "lse row " << i;
      }
    }
    for (int64_t i = 0; i < B * S * H * D; ++i) {
      const int64_t row = i / D, h = row % H, s = (row / H) % S, b = row / (H * S);
      if ((b * H + h) * S + s == 4) continue;
      ASSERT_FALSE(std::isnan(od[i])) << "out " << i;
      EXPECT_NEAR(od[i], oh[i], 4e-6 * std::max(1.0f, std::fabs(oh[i]))) << "out " << i;
    }
  }
}

}  // namespace
