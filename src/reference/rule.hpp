// DESIGN.md's correctness rule, in one place for the tests and the CLI.
//   fp16/bf16: max|out - ref| <= 2 * max|naive_same_dtype - ref| + atol
//   fp32:      max|out - ref| <= 2 * max|naive_fp32 - ref|
//                               + 8 * eps32 * sqrt(seqlen_k + head_dim) * max|ref| + atol
// (the second term covers the kernel summing in another order than the naive
// fp32 loop: random-walk rounding over the seqlen_k terms of a row and the
// head_dim terms of a dot product). atol = 1e-5 * max(1, max|ref|) absorbs
// denormal-level noise. NaN never passes.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <limits>

namespace flashattn::reference {

struct Verdict {
  double max_err = 0;       // max |out - ref|
  double naive_err = 0;     // max |naive - ref|
  double tolerance = 0;
  double max_ref = 0;
  bool has_nan = false;
  bool pass = false;
};

// `get_out(i)`, `get_naive(i)` and `get_ref(i)` return element i as double.
// Equal infinities (LSE of empty rows) count as zero error.
template <class Out, class Naive, class Ref>
Verdict judge(size_t n, Out get_out, Naive get_naive, Ref get_ref, bool is_fp32,
              long long seqlen_k, long long head_dim) {
  Verdict v;
  auto diff = [](double a, double b) {
    if (std::isinf(a) && std::isinf(b) && a == b) return 0.0;
    return std::fabs(a - b);
  };
  for (size_t i = 0; i < n; ++i) {
    double o = get_out(i), r = get_ref(i), nv = get_naive(i);
    if (std::isnan(o)) v.has_nan = true;
    if (std::isfinite(r)) v.max_ref = std::max(v.max_ref, std::fabs(r));
    double e = diff(o, r);
    v.max_err = std::max(v.max_err, std::isnan(e) ? std::numeric_limits<double>::infinity() : e);
    double ne = diff(nv, r);
    if (!std::isnan(ne)) v.naive_err = std::max(v.naive_err, ne);
  }
  const double atol = 1e-5 * std::max(1.0, v.max_ref);
  v.tolerance = 2.0 * v.naive_err + atol;
  if (is_fp32) {
    const double eps32 = std::numeric_limits<float>::epsilon();
    v.tolerance += 8.0 * eps32 * std::sqrt(double(seqlen_k + head_dim)) * v.max_ref;
  }
  v.pass = !v.has_nan && v.max_err <= v.tolerance;
  return v;
}

}  // namespace flashattn::reference
