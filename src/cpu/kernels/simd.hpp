// Portable SIMD layer for the CPU kernels: GCC vector extensions, so one
// source compiles to AVX-512, AVX2 or SSE2 depending on the flags of the
// translation unit that includes it (kernels_<isa>.cpp). FA_ISA_NS names a
// per-ISA namespace so inline functions compiled for different ISAs never
// merge at link time; FA_VW is the vector width in floats.
#pragma once

#include <cstddef>
#include <cstdint>
#include <limits>

#if !defined(FA_ISA_NS) || !defined(FA_VW)
#error "include cpu kernel headers through a kernels_<isa>.cpp that defines FA_ISA_NS and FA_VW"
#endif

namespace flashattn::detail::cpu::FA_ISA_NS {

constexpr int VW = FA_VW;

typedef float vf __attribute__((vector_size(VW * 4)));
typedef int32_t vi __attribute__((vector_size(VW * 4)));
// Same vectors with 4-byte alignment: unaligned loads and stores.
typedef float vf_u __attribute__((vector_size(VW * 4), aligned(4)));

// Prefetches (into L1) every 64-byte line of [p, p + bytes).
inline void prefetch_lines(const void* p, int64_t bytes) {
  const char* c = static_cast<const char*>(p);
  for (int64_t o = 0; o < bytes; o += 64) __builtin_prefetch(c + o, 0, 3);
}

// Prefetches (into L1) rows [0, rows) of floats, n floats each, ld apart.
inline void prefetch_block(const float* p, int64_t rows, int64_t n, int64_t ld) {
  for (int64_t r = 0; r < rows; ++r) prefetch_lines(p + r * ld, int64_t(sizeof(float)) * n);
}

inline vf vload(const float* p) { return *reinterpret_cast<const vf_u*>(p); }
inline void vstore(float* p, vf v) { *reinterpret_cast<vf_u*>(p) = v; }
inline vf vsplat(float x) {
  vf v;
#pragma GCC unroll 16
  for (int i = 0; i < VW; ++i) v[i] = x;
  return v;
}
inline vf vmax(vf a, vf b) { return a > b ? a : b; }
inline vf vmin(vf a, vf b) { return a < b ? a : b; }
inline vf vsel(vi m, vf a, vf b) { return m ? a : b; }
inline vf as_vf(vi v) { return reinterpret_cast<vf>(v); }
inline vi as_vi(vf v) { return reinterpret_cast<vi>(v); }

// Two keys per vector (the decode softmax, forward.hpp): lanes [0, VW / 2)
// hold the first VW / 2 columns of row a, lanes [VW / 2, VW) those of row b.
// Half-width loads joined by a shuffle (memcpy into a vector went through
// the stack). 8 lanes and more only; below, the functions return v / do
// nothing and are never called.
constexpr int HW = VW / 2;
#if FA_VW >= 8
typedef float vh_u __attribute__((vector_size(VW * 2), aligned(4)));
#endif
inline vf vload_halves(const float* a, const float* b) {
#if FA_VW == 16
  const vh_u lo = *reinterpret_cast<const vh_u*>(a), hi = *reinterpret_cast<const vh_u*>(b);
  return __builtin_shufflevector(lo, hi, 0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15);
#elif FA_VW == 8
  const vh_u lo = *reinterpret_cast<const vh_u*>(a), hi = *reinterpret_cast<const vh_u*>(b);
  return __builtin_shufflevector(lo, hi, 0, 1, 2, 3, 4, 5, 6, 7);
#else
  (void)b;
  return vload(a);
#endif
}
// The lower half of v to a.
inline void vstore_low(float* a, vf v) {
#if FA_VW == 16
  *reinterpret_cast<vh_u*>(a) = __builtin_shufflevector(v, v, 0, 1, 2, 3, 4, 5, 6, 7);
#elif FA_VW == 8
  *reinterpret_cast<vh_u*>(a) = __builtin_shufflevector(v, v, 0, 1, 2, 3);
#else
  (void)a, (void)v;
#endif
}
// The two halves exchanged, and the lower half in both.
inline vf vswap_halves(vf v) {
#if FA_VW == 16
  return __builtin_shufflevector(v, v, 8, 9, 10, 11, 12, 13, 14, 15, 0, 1, 2, 3, 4, 5, 6, 7);
#elif FA_VW == 8
  return __builtin_shufflevector(v, v, 4, 5, 6, 7, 0, 1, 2, 3);
#else
  return v;
#endif
}
inline vf vdup_low(vf v) {
#if FA_VW == 16
  return __builtin_shufflevector(v, v, 0, 1, 2, 3, 4, 5, 6, 7, 0, 1, 2, 3, 4, 5, 6, 7);
#elif FA_VW == 8
  return __builtin_shufflevector(v, v, 0, 1, 2, 3, 0, 1, 2, 3);
#else
  return v;
#endif
}
// vload_halves' inverse.
inline void vstore_halves(float* a, float* b, vf v) {
  vstore_low(a, v);
  vstore_low(b, vswap_halves(v));
}
// -1 in the lower half's lanes, 0 in the upper half's.
inline vi vlow_mask() {
  vi m;
#pragma GCC unroll 16
  for (int i = 0; i < VW; ++i) m[i] = i < HW ? -1 : 0;
  return m;
}

constexpr float kNegInf = -__builtin_inff();
constexpr float kInf = __builtin_inff();

// exp(x), Cephes expf: x = n ln2 + r with |r| <= ln2/2, degree-6 polynomial
// for e^r, 2^n built in the exponent bits. About 1 ulp on [-87.3, 88];
// returns 0 below -87.3 (true value is below FLT_MIN: flushed) and exp(88)
// above 88 (callers never need larger values). exp(-inf) = 0.
inline vf vexp(vf x) {
  const vf lo = vsplat(-87.3f), hi = vsplat(88.0f);
  // Operand order matters for NaN: vmax(a, b) / vmin(a, b) return b when the
  // comparison fails, so a NaN x stays NaN (exp(NaN) = NaN, IEEE) instead of
  // being clamped to a finite value.
  vf xc = vmin(hi, vmax(lo, x));
  // Round x*log2(e) to nearest with the 1.5*2^23 trick: the integer lands in
  // the low mantissa bits of t.
  const vf magic = vsplat(12582912.0f);
  vf t = xc * vsplat(1.44269504088896341f) + magic;
  vf n = t - magic;
  vi ni = as_vi(t) - as_vi(magic);
  vf r = xc - n * vsplat(0.693359375f);
  r = r - n * vsplat(-2.12194440e-4f);
  vf p = vsplat(1.9875691500e-4f);
  p = p * r + vsplat(1.3981999507e-3f);
  p = p * r + vsplat(8.3334519073e-3f);
  p = p * r + vsplat(4.1665795894e-2f);
  p = p * r + vsplat(1.6666665459e-1f);
  p = p * r + vsplat(5.0000001201e-1f);
  vf y = p * (r * r) + r + vsplat(1.0f);
  vf scale = as_vf((ni + 127) << 23);
  return vsel(x < lo, vsplat(0.0f), y * scale);
}

// tanh(x), Cephes tanhf: odd polynomial below 0.625, 1 - 2/(e^{2|x|}+1)
// above (with the sign restored). About 2 ulp.
inline vf vtanh(vf x) {
  vi sign = as_vi(x) & (int32_t)0x80000000;
  vf a = as_vf(as_vi(x) & 0x7fffffff);
  vf e = vexp(a + a);
  vf big = vsplat(1.0f) - vsplat(2.0f) / (e + vsplat(1.0f));
  big = as_vf(as_vi(big) | sign);
  vf z = x * x;
  vf p = vsplat(-5.70498872745e-3f);
  p = p * z + vsplat(2.06390887954e-2f);
  p = p * z + vsplat(-5.37397155531e-2f);
  p = p * z + vsplat(1.33314422036e-1f);
  p = p * z + vsplat(-3.33332819422e-1f);
  vf small = p * z * x + x;
  return vsel(a < vsplat(0.625f), small, big);
}

// Q's folded factor: the softmax scale, or scale / cap with a softcap (the
// kernels apply the cap to scale * q.k / cap). Kept >= FLT_MIN: a scale so
// small that scale / cap underflows to 0 turned a masked score's -inf into
// -inf * 0 = NaN (C ABI fuzzer: scale 1.4e-45, softcap 98.7); scores that
// small are 0 to the softmax either way.
inline float q_factor(float scale, float softcap) {
  if (softcap <= 0.0f) return scale;
  const float f = scale / softcap;
  return f < std::numeric_limits<float>::min() ? std::numeric_limits<float>::min() : f;
}

// s = cap * tanh(acc), where acc already holds (scale/cap) * q.k; -inf marks a
// masked element and stays -inf.
inline vf vsoftcap(vf acc, float cap) {
  vf s = vsplat(cap) * vtanh(acc);
  return vsel(acc == vsplat(kNegInf), vsplat(kNegInf), s);
}

inline constexpr int64_t round_up(int64_t x, int64_t m) { return (x + m - 1) / m * m; }

}  // namespace flashattn::detail::cpu::FA_ISA_NS
