// fp8 (e4m3) forward on the CPU: dequantise q, k, v (times their descale
// factors) into dense fp32 copies, run the fp32 forward into a dense fp32 O,
// and round O to bf16 into the caller's strided output. The CPU has no fp8
// arithmetic to gain from, so this path is about agreeing with the GPU's
// semantics, not speed: O(N d) extra memory, one pass over each tensor.
#include "cpu/fp8_forward.hpp"

#include <cstdint>
#include <new>
#include <vector>

#include "common/fp8.hpp"
#include "common/host_convert.hpp"

namespace flashattn::detail::cpu {
namespace {

Strides dense_strides(int64_t seqlen, int64_t heads, int64_t head_dim) {
  return {seqlen * heads * head_dim, heads * head_dim, head_dim};
}

// Dense fp32 [batch, seqlen, heads, head_dim] copy of a strided e4m3 tensor.
void dequantise(const void* src, const Strides& s, int64_t batch, int64_t seqlen, int64_t heads,
                int64_t head_dim, const float* descale, float* dst) {
  const float mul = descale != nullptr ? *descale : 1.0f;
  float table[256];
  for (int i = 0; i < 256; ++i) table[i] = mul * e4m3_to_float(static_cast<uint8_t>(i));
  const auto* bytes = static_cast<const uint8_t*>(src);
  const int64_t rows = batch * seqlen * heads;
#pragma omp parallel for schedule(static)
  for (int64_t r = 0; r < rows; ++r) {
    const int64_t b = r / (seqlen * heads), t = (r / heads) % seqlen, h = r % heads;
    const uint8_t* in = bytes + b * s.batch + t * s.seq + h * s.head;
    float* out = dst + r * head_dim;
    for (int64_t d = 0; d < head_dim; ++d) out[d] = table[in[d]];
  }
}

// The tensors as dense rows: padded [batch, seqlen], or varlen's packed
// [1, total] (its cu_seqlens index the same rows of the fp32 copies).
struct Fp8Rows {
  int64_t batch, seqlen_q, seqlen_k;
};
Fp8Rows rows_of(const FwdParams& p) {
  if (p.varlen()) return {1, p.total_q, p.total_k};
  return {p.batch, p.seqlen_q, p.seqlen_k};
}

}  // namespace

FwdParams fp8_as_fp32_shape(const FwdParams& p) noexcept {
  const Fp8Rows r = rows_of(p);
  FwdParams f = p;
  f.dtype = DType::F32;
  f.q = f.k = f.v = nullptr;
  f.out = nullptr;
  f.q_str = f.o_str = dense_strides(r.seqlen_q, p.heads_q, p.head_dim);
  f.k_str = f.v_str = dense_strides(r.seqlen_k, p.heads_kv, p.head_dim);
  if (p.varlen()) {  // packed rows: sequence b starts at row cu_seqlens[b] (common/sequence.hpp)
    f.q_str.batch = f.o_str.batch = f.k_str.batch = f.v_str.batch = 0;
  }
  f.q_descale = f.k_descale = f.v_descale = nullptr;
  return f;
}

size_t fp8_copy_bytes(const FwdParams& p) noexcept {
  const Fp8Rows r = rows_of(p);
  const int64_t nq = r.batch * r.seqlen_q * p.heads_q * p.head_dim;
  const int64_t nk = r.batch * r.seqlen_k * p.heads_kv * p.head_dim;
  return sizeof(float) * static_cast<size_t>(2 * nq + 2 * nk);
}

Status fp8_forward(const FwdParams& p, Status (*fp32_forward)(const FwdParams&) noexcept) noexcept {
  try {
    const Fp8Rows r = rows_of(p);
    const int64_t nq = r.batch * r.seqlen_q * p.heads_q * p.head_dim;
    const int64_t nk = r.batch * r.seqlen_k * p.heads_kv * p.head_dim;
    // At least one element each: the fp32 kernels form row pointers of
    // empty tensors too (a null base plus an offset is undefined behaviour).
    auto len = [](int64_t n) { return static_cast<size_t>(n > 0 ? n : 1); };
    std::vector<float> q(len(nq)), k(len(nk)), v(len(nk)), o(len(nq));
    dequantise(p.q, p.q_str, r.batch, r.seqlen_q, p.heads_q, p.head_dim, p.q_descale, q.data());
    dequantise(p.k, p.k_str, r.batch, r.seqlen_k, p.heads_kv, p.head_dim, p.k_descale, k.data());
    dequantise(p.v, p.v_str, r.batch, r.seqlen_k, p.heads_kv, p.head_dim, p.v_descale, v.data());
    FwdParams f = fp8_as_fp32_shape(p);
    f.q = q.data();
    f.k = k.data();
    f.v = v.data();
    f.out = o.data();
    if (Status s = fp32_forward(f); !s.ok()) return s;
    auto* out = static_cast<uint16_t*>(p.out);
    const int64_t rows = r.batch * r.seqlen_q * p.heads_q;
#pragma omp parallel for schedule(static)
    for (int64_t i = 0; i < rows; ++i) {
      const int64_t b = i / (r.seqlen_q * p.heads_q), t = (i / p.heads_q) % r.seqlen_q,
                    h = i % p.heads_q;
      uint16_t* dst = out + b * p.o_str.batch + t * p.o_str.seq + h * p.o_str.head;
      const float* src = o.data() + i * p.head_dim;
      for (int64_t d = 0; d < p.head_dim; ++d) dst[d] = float_to_bf16(src[d]);
    }
    return Status::Ok();
  } catch (const std::bad_alloc&) {
    return Status::Error(ErrorCode::Internal, "cpu backend: out of memory for the fp8 copies");
  }
}

}  // namespace flashattn::detail::cpu
