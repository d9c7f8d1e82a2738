#include "reference/naive_same_dtype.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <stdexcept>
#include <string>

#include <cstdint>
#include <cstring>

namespace flashattn::reference {
namespace {

// fp16 rounding: _Float16 where the compiler has it; clang < 15 (the
// sanitizer/fuzzer build uses clang 14) has no x86 _Float16, so round by
// arithmetic there: the fp16 quantum at f's binade (2^-24 below 2^-14),
// nearbyint ties to even, and >= 65520 overflows to inf.
float round_to_f16(float f) {
#if defined(__clang__) && __clang_major__ < 15
  if (!std::isfinite(f)) return f;
  if (std::fabs(f) >= 65520.0f) return std::copysign(std::numeric_limits<float>::infinity(), f);
  int e = 0;
  std::frexp(f, &e);  // |f| in [2^(e-1), 2^e)
  const int q = std::max(e - 1, -14) - 10;
  return std::ldexp(std::nearbyint(std::ldexp(f, -q)), q);
#else
  return static_cast<float>(static_cast<_Float16>(f));
#endif
}

// e4m3 rounding, ties to even, saturating at +-448 as the kernels' cvt
// .satfinite does: 3 fraction bits, binades from 2^-6, subnormal step 2^-9.
float round_to_e4m3(float f) {
  if (!std::isfinite(f)) return f;
  if (f == 0.f) return f;
  const int e = std::max(std::ilogb(f), -6);
  const float r = std::ldexp(std::nearbyint(std::ldexp(f, 3 - e)), e - 3);
  return std::fabs(r) > 448.f ? std::copysign(448.f, f) : r;
}

// Round to the nearest value of the dtype (ties to even); identity for F32.
float round_to(DType dt, float f) {
  if (dt == DType::F8E4M3) return round_to_e4m3(f);
  if (dt == DType::F16) return round_to_f16(f);
  if (dt == DType::BF16) {
    if (std::isnan(f)) return f;
    uint32_t u;
    std::memcpy(&u, &f, 4);
    u += 0x7fffu + ((u >> 16) & 1u);
    u &= 0xffff0000u;
    std::memcpy(&f, &u, 4);
  }
  return f;
}

struct Dims {
  int64_t B, Sq, Sk, H, Hkv, D, Dv, group;
  float scale, cap;
  explicit Dims(const Problem& p)
      : B(p.batch), Sq(p.seqlen_q), Sk(p.seqlen_k), H(p.heads_q), Hkv(p.heads_kv),
        D(p.head_dim), Dv(p.dim_v()), group(p.heads_kv ? p.heads_q / p.heads_kv : 1),
        scale(static_cast<float>(p.scale == 0 ? 1.0 / std::sqrt(double(p.head_dim)) : p.scale)),
        cap(static_cast<float>(p.softcap)) {}
  int64_t qi(int64_t b, int64_t s, int64_t h) const { return ((b * Sq + s) * H + h) * D; }
  int64_t ki(int64_t b, int64_t s, int64_t h) const { return ((b * Sk + s) * Hkv + h) * D; }
  int64_t oi(int64_t b, int64_t s, int64_t h) const { return ((b * Sq + s) * H + h) * Dv; }  // out, dout
  int64_t vi(int64_t b, int64_t s, int64_t h) const { return ((b * Sk + s) * Hkv + h) * Dv; }  // v, dv
};

// Visibility, from the definition: i + off - left <= j <= i + off + right.
bool sees(const Problem& p, int64_t i, int64_t j) {
  const int64_t diag = i + p.seqlen_k - p.seqlen_q;
  const int64_t right = p.causal ? 0 : p.window_right;
  return (p.window_left < 0 || j >= diag - p.window_left) && (right < 0 || j <= diag + right);
}

// Scores of one row after scale and softcap, fp32; also tanh for the backward.
void row_scores(const Problem& p, const Dims& d, const std::vector<float>& q,
                const std::vector<float>& k, int64_t b, int64_t h, int64_t i, float* s, float* t) {
  const int64_t hk = h / d.group;
  const float* qi = &q[d.qi(b, i, h)];
  for (int64_t j = 0; j < d.Sk; ++j) {
    const float* kj = &k[d.ki(b, j, hk)];
    float acc = 0.f;
    for (int64_t e = 0; e < d.D; ++e) acc += qi[e] * kj[e];
    float x = acc * d.scale;
    if (d.cap > 0) {
      t[j] = std::tanh(x / d.cap);
      x = d.cap * t[j];
    }
    s[j] = sees(p, i, j) ? x : -std::numeric_limits<float>::infinity();
  }
}

std::vector<float> to_float(const std::vector<double>& v) { return {v.begin(), v.end()}; }

}  // namespace

void naive_forward(const Problem& p, flashattn::DType dt, const std::vector<double>& qd,
                   const std::vector<double>& kd, const std::vector<double>& vd,
                   std::vector<double>* out, std::vector<double>* lse, double fp8_lag_log2) {
  const Dims d(p);
  const float lag = static_cast<float>(std::exp2(fp8_lag_log2));
  const std::vector<float> q = to_float(qd), k = to_float(kd), v = to_float(vd);
  out->assign(static_cast<size_t>(d.B * d.Sq * d.H * d.Dv), 0.0);
  lse->assign(static_cast<size_t>(d.B * d.H * d.Sq), 0.0);
#pragma omp parallel for collapse(2) schedule(dynamic)
  for (int64_t b = 0; b < d.B; ++b) {
    for (int64_t h = 0; h < d.H; ++h) {
      std::vector<float> s(d.Sk), t(d.Sk), pr(d.Sk), o(d.Dv);
      const int64_t hk = h / d.group;
      for (int64_t i = 0; i < d.Sq; ++i) {
        row_scores(p, d, q, k, b, h, i, s.data(), t.data());
        float m = -std::numeric_limits<float>::infinity();
        for (float x : s) m = std::max(m, x);
        double* oi = &(*out)[d.oi(b, i, h)];
        if (m == -std::numeric_limits<float>::infinity()) {
          (*lse)[(b * d.H + h) * d.Sq + i] = -std::numeric_limits<double>::infinity();
          continue;  // out stays 0
        }
        float l = 0.f;
        for (int64_t j = 0; j < d.Sk; ++j) {
          pr[j] = std::exp(s[j] - m);
          l += pr[j];
        }
        // fp8: P stays unnormalised (in (0, 2^lag], the row max at 2^lag) when
        // it is rounded, as fp8 kernels keep it (P / l would mostly underflow
        // e4m3's 2^-9), and O = (P V) / (2^lag l) is rounded to bf16.
        const bool fp8 = dt == DType::F8E4M3;
        for (int64_t j = 0; j < d.Sk; ++j) pr[j] = fp8 ? round_to(dt, pr[j] * lag) : round_to(dt, pr[j] / l);
        const float lo = fp8 ? l * lag : l;  // O's divisor: the rounded P's scale
        std::fill(o.begin(), o.end(), 0.f);
        for (int64_t j = 0; j < d.Sk; ++j) {
          if (pr[j] == 0.f) continue;
          const float* vj = &v[d.vi(b, j, hk)];
          for (int64_t e = 0; e < d.Dv; ++e) o[e] += pr[j] * vj[e];
        }
        for (int64_t e = 0; e < d.Dv; ++e) oi[e] = fp8 ? round_to(DType::BF16, o[e] / lo) : round_to(dt, o[e]);
        (*lse)[(b * d.H + h) * d.Sq + i] = m + std::log(l);
      }
    }
  }
}

void naive_forward_fp8(const Problem& p, const std::vector<double>& q, const std::vector<double>& k,
                       const std::vector<double>& v, const std::vector<double>& ref,
                       std::vector<double>* out, std::vector<double>* lse) {
  double worst = -1.0;
  for (double lag : kFp8LagsLog2) {
    std::vector<double> o, l;
    naive_forward(p, DType::F8E4M3, q, k, v, &o, &l, lag);
    double e = 0.0;
    for (size_t i = 0; i < o.size() && i < ref.size(); ++i) e = std::max(e, std::abs(o[i] - ref[i]));
    if (e > worst) {
      worst = e;
      *out = std::move(o);
      *lse = std::move(l);
    }
  }
}

void naive_backward(const Problem& p, flashattn::DType dt, const std::vector<double>& qd,
                    const std::vector<double>& kd, const std::vector<double>& vd,
                    const std::vector<double>& doutd, std::vector<double>* dq,
                    std::vector<double>* dk, std::vector<double>* dv,
                    const std::vector<double>* given_out) {
  const Dims d(p);
  std::vector<double> outd, lsed;
  naive_forward(p, dt, qd, kd, vd, &outd, &lsed);
  if (given_out != nullptr && given_out->size() != outd.size()) {
    throw std::invalid_argument("naive_backward: given_out has " + std::to_string(given_out->size()) +
                                " elements, O has " + std::to_string(outd.size()));
  }
  const std::vector<float> q = to_float(qd), k = to_float(kd), v = to_float(vd),
                           dO = to_float(doutd), O = to_float(given_out != nullptr ? *given_out : outd);
  dq->assign(qd.size(), 0.0);
  dk->assign(kd.size(), 0.0);
  dv->assign(vd.size(), 0.0);
#pragma omp parallel for collapse(2) schedule(dynamic)
  for (int64_t b = 0; b < d.B; ++b) {
    for (int64_t hk = 0; hk < d.Hkv; ++hk) {
      std::vector<float> s(d.Sk), t(d.Sk), dqa(d.D);
      std::vector<float> dka(static_cast<size_t>(d.Sk * d.D), 0.f), dva(static_cast<size_t>(d.Sk * d.Dv), 0.f);
      for (int64_t h = hk * d.group; h < (hk + 1) * d.group; ++h) {
        for (int64_t i = 0; i < d.Sq; ++i) {
          const float lse = static_cast<float>(lsed[(b * d.H + h) * d.Sq + i]);
          const float* qi = &q[d.qi(b, i, h)];
          const float* doi = &dO[d.oi(b, i, h)];
          const float* oi = &O[d.oi(b, i, h)];
          std::fill(dqa.begin(), dqa.end(), 0.f);
          if (lse != -std::numeric_limits<float>::infinity()) {
            row_scores(p, d, q, k, b, h, i, s.data(), t.data());
            float Di = 0.f;
            for (int64_t e = 0; e < d.Dv; ++e) Di += doi[e] * oi[e];
            for (int64_t j = 0; j < d.Sk; ++j) {
              const float pf = std::exp(s[j] - lse);  // 0 for masked keys
              if (pf == 0.f) continue;
              const float* vj = &v[d.vi(b, j, hk)];
              const float* kj = &k[d.ki(b, j, hk)];
              float dp = 0.f;
              for (int64_t e = 0; e < d.Dv; ++e) dp += doi[e] * vj[e];
              float ds = pf * (dp - Di);
              if (d.cap > 0) ds *= 1.f - t[j] * t[j];
              ds = round_to(dt, ds);
              const float pr = round_to(dt, pf);
#pragma omp simd  // element-wise updates: same result as the plain loop
              for (int64_t e = 0; e < d.D; ++e) {
                dqa[e] += ds * kj[e];
                dka[j * d.D + e] += ds * qi[e];
              }
#pragma omp simd
              for (int64_t e = 0; e < d.Dv; ++e) dva[j * d.Dv + e] += pr * doi[e];
            }
          }
          double* dqi = &(*dq)[d.qi(b, i, h)];
          for (int64_t e = 0; e < d.D; ++e) dqi[e] = round_to(dt, dqa[e] * d.scale);
        }
      }
      for (int64_t j = 0; j < d.Sk; ++j) {
        double* dkj = &(*dk)[d.ki(b, j, hk)];
        double* dvj = &(*dv)[d.vi(b, j, hk)];
        for (int64_t e = 0; e < d.D; ++e) dkj[e] = round_to(dt, dka[j * d.D + e] * d.scale);
        for (int64_t e = 0; e < d.Dv; ++e) dvj[e] = round_to(dt, dva[j * d.Dv + e]);
      }
    }
  }
}

}  // namespace flashattn::reference
