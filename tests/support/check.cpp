#include "support/check.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <limits>
#include <sstream>

namespace fa_test {
namespace {
constexpr double kEps32 = 1.1920928955078125e-07;  // 2^-23
}

double fp32_rel_tol(int64_t reduce_len, int64_t head_dim) {
  return 8.0 * kEps32 *
         std::sqrt(static_cast<double>(std::max<int64_t>(reduce_len, 1)) *
                   static_cast<double>(std::max<int64_t>(head_dim, 1)));
}

ErrorStats measure(const std::vector<double>& out, const std::vector<double>& ref,
                   const std::vector<double>& naive) {
  ErrorStats s;
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

namespace {
::testing::AssertionResult verdict(const std::string& what, const ErrorStats& s,
                                   const std::vector<double>& out, const std::vector<double>& ref,
                                   size_t n_expected) {
  std::ostringstream m;
  m << what << ": max|out-ref| = " << s.max_err << " (at " << s.worst_index << "), tol = " << s.tol
    << ", max|naive-ref| = " << s.naive_err << ", max|ref| = " << s.max_ref;
  if (out.size() != n_expected || ref.size() != n_expected) {
    return ::testing::AssertionFailure() << what << ": size mismatch " << out.size() << " vs "
                                         << ref.size();
  }
  if (s.bad) {
    return ::testing::AssertionFailure()
           << m.str() << "; " << s.bad << " elements NaN/inf or -inf mismatched, first at "
           << s.first_bad << ": out " << out[s.first_bad] << " ref " << ref[s.first_bad];
  }
  if (!(s.max_err <= s.tol)) {
    return ::testing::AssertionFailure() << m.str() << "; out " << out[s.worst_index] << " ref "
                                         << ref[s.worst_index];
  }
  // FA_TEST_VERBOSE=1 prints every comparison: how close each run came to its bound.
  if (std::getenv("FA_TEST_VERBOSE")) std::printf("[ rule ] %s\n", m.str().c_str());
  return ::testing::AssertionSuccess() << m.str();
}
}  // namespace

::testing::AssertionResult within_rule(const std::string& what, flashattn::DType dt,
                                       const std::vector<double>& out,
                                       const std::vector<double>& ref,
                                       const std::vector<double>& naive, int64_t reduce_len,
                                       int64_t head_dim, double magnitude) {
  if (out.size() != ref.size() || (!naive.empty() && naive.size() != ref.size())) {
    return ::testing::AssertionFailure() << what << ": size mismatch";
  }
  ErrorStats s = measure(out, ref, naive);
  const double atol = std::max(1e-5 * s.max_ref,
                               16.0 * kEps32 * std::sqrt(static_cast<double>(head_dim)) * magnitude);
  if (dt == flashattn::DType::F32) {
    s.tol = fp32_rel_tol(reduce_len, head_dim) * s.max_ref + atol;
  } else {
    s.tol = 2.0 * s.naive_err + atol;
  }
  return verdict(what, s, out, ref, ref.size());
}

::testing::AssertionResult lse_within_rule(const std::string& what, const std::vector<double>& out,
                                           const std::vector<double>& ref,
                                           const std::vector<double>& naive, int64_t head_dim) {
  if (out.size() != ref.size() || (!naive.empty() && naive.size() != ref.size())) {
    return ::testing::AssertionFailure() << what << ": size mismatch";
  }
  ErrorStats s = measure(out, ref, naive);
  s.tol = 2.0 * s.naive_err + 16.0 * kEps32 * std::sqrt(static_cast<double>(head_dim)) *
                                  std::max(1.0, s.max_ref);
  return verdict(what, s, out, ref, ref.size());
}

}  // namespace fa_test
