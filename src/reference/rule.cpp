#include "reference/rule.hpp"

#include <algorithm>
#include <cmath>

namespace flashattn::reference {
namespace {

constexpr double kEps32 = 1.1920928955078125e-07;  // 2^-23

double max_abs(const std::vector<double>& x) {
  double m = 0;
  for (double v : x) m = std::max(m, std::abs(v));
  return m;
}

// One quantum of the dtype at |x| (fp16: 10 fraction bits, subnormal step
// 2^-24; bf16: 7, normal down to 2^-126).
double ulp_at(DType dt, double x) {
  const int frac = dt == DType::F16 ? 10 : 7;
  const int min_exp = dt == DType::F16 ? -14 : -126;
  const double a = std::abs(x);
  const int e = a > 0 ? std::max(std::ilogb(a), min_exp) : min_exp;
  return std::ldexp(1.0, e - frac);
}

double max_row_norm(const std::vector<double>& x, int64_t D) {
  double m = 0;
  for (size_t r = 0; r + size_t(D) <= x.size(); r += size_t(D)) {
    double s = 0;
    for (int64_t e = 0; e < D; ++e) s += x[r + size_t(e)] * x[r + size_t(e)];
    m = std::max(m, std::sqrt(s));
  }
  return m;
}

bool sizes_match(const std::vector<double>& out, const std::vector<double>& ref,
                 const std::vector<double>& naive) {
  return out.size() == ref.size() && (naive.empty() || naive.size() == ref.size());
}

}  // namespace

double fp32_rel_tol(int64_t reduce_len, int64_t head_dim) {
  return 8.0 * kEps32 *
         std::sqrt(static_cast<double>(std::max<int64_t>(reduce_len, 1)) *
                   static_cast<double>(std::max<int64_t>(head_dim, 1)));
}

Magnitudes magnitudes(const std::vector<double>& q, const std::vector<double>& k,
                      const std::vector<double>& v, const std::vector<double>& dout,
                      int64_t head_dim, double scale, int64_t head_dim_v) {
  const int64_t dv = head_dim_v > 0 ? head_dim_v : head_dim;
  Magnitudes m;
  m.out = max_abs(v);
  if (!dout.empty()) {
    const double dp = scale * max_row_norm(dout, dv) * max_row_norm(v, dv);
    m.dq = dp * max_abs(k);
    m.dk = dp * max_abs(q);
    m.dv = max_abs(dout);
  }
  return m;
}

ErrorStats measure(const std::vector<double>& out, const std::vector<double>& ref,
                   const std::vector<double>& naive) {
  ErrorStats s;
  if (!sizes_match(out, ref, naive)) {
    s.size_mismatch = true;
    return s;
  }
  for (size_t i = 0; i < out.size(); ++i) {
    const double o = out[i], r = ref[i];
    if (std::isinf(r)) {  // only LSE has infinities: they must match exactly
      if (o != r) {
        ++s.bad;
        if (s.first_bad < 0) s.first_bad = static_cast<int64_t>(i);
      }
      continue;
    }
    if (!std::isfinite(o) || std::isnan(r)) {
      ++s.bad;
      if (s.first_bad < 0) s.first_bad = static_cast<int64_t>(i);
      continue;
    }
    s.max_ref = std::max(s.max_ref, std::abs(r));
    const double e = std::abs(o - r);
    if (e > s.max_err) {
      s.max_err = e;
      s.worst_index = static_cast<int64_t>(i);
    }
    if (!naive.empty() && std::isfinite(naive[i])) {
      s.naive_err = std::max(s.naive_err, std::abs(naive[i] - r));
    }
  }
  return s;
}

ErrorStats judge(DType dt, const std::vector<double>& out, const std::vector<double>& ref,
                 const std::vector<double>& naive, int64_t reduce_len, int64_t head_dim,
                 double magnitude) {
  ErrorStats s = measure(out, ref, naive);
  s.judged_err = s.max_err;
  if (dt != DType::F32 && !s.size_mismatch) {
    s.judged_err = 0;
    for (size_t i = 0; i < out.size(); ++i) {
      if (!std::isfinite(ref[i]) || !std::isfinite(out[i])) continue;  // counted in s.bad
      s.judged_err = std::max(s.judged_err, std::abs(out[i] - ref[i]) - 0.5 * ulp_at(dt, ref[i]));
    }
  }
  // The floor applies to fp16/bf16 too: where the exact result cancels to 0
  // the naive run can cancel exactly as well, while a kernel that sums in
  // another order keeps fp32 residue (seen on the H200: dQ = 1.8e-7 against
  // ref = naive = 0 with one visible key).
  const double atol = std::max(1e-5 * s.max_ref,
                               16.0 * kEps32 * std::sqrt(static_cast<double>(head_dim)) * magnitude);
  s.tol = dt == DType::F32 ? fp32_rel_tol(reduce_len, head_dim) * s.max_ref + atol
                           : 2.0 * s.naive_err + atol;
  return s;
}

ErrorStats judge_lse(const std::vector<double>& out, const std::vector<double>& ref,
                     const std::vector<double>& naive, int64_t head_dim, double score_err) {
  ErrorStats s = measure(out, ref, naive);
  s.judged_err = s.max_err;
  s.tol = 2.0 * s.naive_err +
          16.0 * kEps32 * std::sqrt(static_cast<double>(head_dim)) * std::max(1.0, s.max_ref) +
          score_err;
  return s;
}

double fp8_score_error(const std::vector<double>& q, const std::vector<double>& k, int64_t batch,
                       int64_t seqlen_q, int64_t seqlen_k, int64_t heads_q, int64_t heads_kv,
                       int64_t head_dim, double scale) {
  const int64_t group = heads_kv > 0 ? heads_q / heads_kv : 1, D = head_dim;
  double worst = 0;
  for (int64_t b = 0; b < batch; ++b)
    for (int64_t h = 0; h < heads_q; ++h)
      for (int64_t i = 0; i < seqlen_q; ++i) {
        const double* qi = &q[static_cast<size_t>(((b * seqlen_q + i) * heads_q + h) * D)];
        for (int64_t j = 0; j < seqlen_k; ++j) {
          const double* kj = &k[static_cast<size_t>(((b * seqlen_k + j) * heads_kv + h / group) * D)];
          double sum = 0;
          for (int64_t d = 0; d < D; ++d) sum += std::abs(qi[d] * kj[d]);
          worst = std::max(worst, sum);
        }
      }
  const double steps = std::ceil(static_cast<double>(D) / 32.0);
  return steps * std::ldexp(1.0, -14) * scale * worst;
}

}  // namespace flashattn::reference
