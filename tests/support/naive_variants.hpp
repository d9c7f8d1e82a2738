// The correctness rule's same-dtype yardstick (DESIGN.md; src/reference/
// naive_same_dtype.hpp) for ALiBi and dropout, which naive_same_dtype does
// not implement: the plain unfused algorithm with fp32 accumulation, the
// ALiBi bias added after scale and softcap, P~ = P Z / (1 - p) rounded to the
// dtype before P~ V, and P~, dS rounded before the backward's GEMMs. Written
// from flashattn.hpp's definitions; header-only so that the emulated-kernel
// test and the GPU test share it. Dense [B, S, H, D] inputs (values already
// representable in the dtype), LSE [B, Hq, Sq].
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <vector>

#include "common/philox.hpp"
#include "flashattn/flashattn.hpp"
#include "support/half.hpp"

namespace fa_test::naive_variants {

struct Shape {
  int64_t B = 1, Sq = 1, Sk = 1, Hq = 1, Hkv = 1, D = 8;
  float scale = 0.f;  // resolved (never 0)
  bool causal = false;
  int64_t wl = -1, wr = -1;
  float softcap = 0.f;
  const float* slopes = nullptr;  // [Hq] or [B, Hq] (per_batch); nullptr = off
  bool per_batch = false;
  const int32_t* keep = nullptr;  // [B, Hq, Sq, Sk]; nullptr = no dropout
  float p = 0.f;
};

// Z of the documented formula (common/philox.hpp) on the keys each row sees
// (window (wl, wr), causal as wr = 0; -1 unbounded), 0 elsewhere:
// [B, Hq, Sq, Sk], what a kernel's returned dropout mask must equal.
inline std::vector<int32_t> formula_keep_mask(int64_t B, int64_t Hq, int64_t Sq, int64_t Sk, bool causal, int64_t wl,
                                              int64_t wr, uint64_t seed, uint64_t offset, float p) {
  const flashattn::detail::DropoutRng rng(seed, offset, p, Hq);
  std::vector<int32_t> m(size_t(B * Hq * Sq * Sk));
  const int64_t off = Sk - Sq, right = causal ? 0 : wr;
  for (int64_t b = 0; b < B; ++b)
    for (int64_t h = 0; h < Hq; ++h)
      for (int64_t i = 0; i < Sq; ++i)
        for (int64_t j = 0; j < Sk; ++j) {
          const bool seen = (wl < 0 || j >= i + off - wl) && (right < 0 || j <= i + off + right);
          m[size_t(((b * Hq + h) * Sq + i) * Sk + j)] = seen && rng.keep(b, h, i, j);
        }
  return m;
}

// Round to dt, as the kernels store it (support/half.hpp's conversions).
inline float round_to(flashattn::DType dt, float f) { return fa_test::round_to(dt, f); }

// Scores of row (b, h, i) after scale, softcap, ALiBi and the mask; tanh in t.
inline void scores(const Shape& s, const std::vector<float>& q, const std::vector<float>& k, int64_t b,
                   int64_t h, int64_t i, float* out, float* t) {
  const int64_t hk = h / (s.Hq / s.Hkv), diag = i + s.Sk - s.Sq;
  const int64_t right = s.causal ? 0 : s.wr;
  const float* qi = &q[size_t(((b * s.Sq + i) * s.Hq + h) * s.D)];
  const float slope = s.slopes ? s.slopes[(s.per_batch ? b * s.Hq : 0) + h] : 0.f;
  for (int64_t j = 0; j < s.Sk; ++j) {
    const float* kj = &k[size_t(((b * s.Sk + j) * s.Hkv + hk) * s.D)];
    float acc = 0.f;
    for (int64_t e = 0; e < s.D; ++e) acc += qi[e] * kj[e];
    float x = acc * s.scale;
    if (s.softcap > 0.f) {
      t[j] = std::tanh(x / s.softcap);
      x = s.softcap * t[j];
    }
    x -= slope * float(std::llabs(diag - j));
    const bool seen = (s.wl < 0 || j >= diag - s.wl) && (right < 0 || j <= diag + right);
    out[j] = seen ? x : -std::numeric_limits<float>::infinity();
  }
}

inline float zf(const Shape& s, int64_t b, int64_t h, int64_t i, int64_t j) {
  if (s.keep == nullptr) return 1.f;
  return s.keep[size_t(((b * s.Hq + h) * s.Sq + i) * s.Sk + j)] ? 1.f / (1.f - s.p) : 0.f;
}

inline void forward(const Shape& s, flashattn::DType dt, const std::vector<float>& q, const std::vector<float>& k,
                    const std::vector<float>& v, std::vector<float>* out, std::vector<float>* lse) {
  out->assign(q.size(), 0.f);
  lse->assign(size_t(s.B * s.Hq * s.Sq), 0.f);
  std::vector<float> sc(size_t(s.Sk)), t(size_t(s.Sk)), o(size_t(s.D));
  for (int64_t b = 0; b < s.B; ++b)
    for (int64_t h = 0; h < s.Hq; ++h)
      for (int64_t i = 0; i < s.Sq; ++i) {
        const int64_t hk = h / (s.Hq / s.Hkv);
        scores(s, q, k, b, h, i, sc.data(), t.data());
        float m = -std::numeric_limits<float>::infinity();
        for (float x : sc) m = std::max(m, x);
        float& L = (*lse)[size_t((b * s.Hq + h) * s.Sq + i)];
        if (m == -std::numeric_limits<float>::infinity()) {
          L = m;
          continue;
        }
        float l = 0.f;
        for (int64_t j = 0; j < s.Sk; ++j) l += (sc[size_t(j)] = std::exp(sc[size_t(j)] - m));
        std::fill(o.begin(), o.end(), 0.f);
        for (int64_t j = 0; j < s.Sk; ++j) {
          const float pr = round_to(dt, sc[size_t(j)] / l * zf(s, b, h, i, j));
          const float* vj = &v[size_t(((b * s.Sk + j) * s.Hkv + hk) * s.D)];
          for (int64_t e = 0; e < s.D; ++e) o[size_t(e)] += pr * vj[e];
        }
        for (int64_t e = 0; e < s.D; ++e) (*out)[size_t(((b * s.Sq + i) * s.Hq + h) * s.D + e)] = round_to(dt, o[size_t(e)]);
        L = m + std::log(l);
      }
}

inline void backward(const Shape& s, flashattn::DType dt, const std::vector<float>& q, const std::vector<float>& k,
                     const std::vector<float>& v, const std::vector<float>& dout, std::vector<float>* dq,
                     std::vector<float>* dk, std::vector<float>* dv) {
  std::vector<float> out, lse;
  forward(s, dt, q, k, v, &out, &lse);
  std::vector<float> dka(k.size(), 0.f), dva(v.size(), 0.f), sc(size_t(s.Sk)), t(size_t(s.Sk), 0.f),
      dqa(size_t(s.D));
  dq->assign(q.size(), 0.f);
  for (int64_t b = 0; b < s.B; ++b)
    for (int64_t h = 0; h < s.Hq; ++h)
      for (int64_t i = 0; i < s.Sq; ++i) {
        const int64_t hk = h / (s.Hq / s.Hkv), qo = ((b * s.Sq + i) * s.Hq + h) * s.D;
        const float L = lse[size_t((b * s.Hq + h) * s.Sq + i)];
        std::fill(dqa.begin(), dqa.end(), 0.f);
        if (L != -std::numeric_limits<float>::infinity()) {
          scores(s, q, k, b, h, i, sc.data(), t.data());
          float Di = 0.f;
          for (int64_t e = 0; e < s.D; ++e) Di += dout[size_t(qo + e)] * out[size_t(qo + e)];
          for (int64_t j = 0; j < s.Sk; ++j) {
            const float pf = std::exp(sc[size_t(j)] - L);
            if (pf == 0.f) continue;
            const int64_t ko = ((b * s.Sk + j) * s.Hkv + hk) * s.D;
            float dp = 0.f;
            for (int64_t e = 0; e < s.D; ++e) dp += dout[size_t(qo + e)] * v[size_t(ko + e)];
            const float z = zf(s, b, h, i, j);
            float ds = pf * (dp * z - Di);
            if (s.softcap > 0.f) ds *= 1.f - t[size_t(j)] * t[size_t(j)];
            ds = round_to(dt, ds);
            const float pr = round_to(dt, pf * z);
            for (int64_t e = 0; e < s.D; ++e) {
              dqa[size_t(e)] += ds * k[size_t(ko + e)];
              dka[size_t(ko + e)] += ds * q[size_t(qo + e)];
              dva[size_t(ko + e)] += pr * dout[size_t(qo + e)];
            }
          }
        }
        for (int64_t e = 0; e < s.D; ++e) (*dq)[size_t(qo + e)] = round_to(dt, dqa[size_t(e)] * s.scale);
      }
  dk->resize(k.size());
  dv->resize(v.size());
  for (size_t x = 0; x < k.size(); ++x) {
    (*dk)[x] = round_to(dt, dka[x] * s.scale);
    (*dv)[x] = round_to(dt, dva[x]);
  }
}

}  // namespace fa_test::naive_variants
