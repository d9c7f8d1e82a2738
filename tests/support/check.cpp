#include "support/check.hpp"

#include <cstdio>
#include <cstdlib>
#include <sstream>

namespace fa_test {
namespace {

::testing::AssertionResult verdict(const std::string& what, const ErrorStats& s,
                                   const std::vector<double>& out, const std::vector<double>& ref) {
  if (s.size_mismatch) {
    return ::testing::AssertionFailure() << what << ": size mismatch " << out.size() << " vs "
                                         << ref.size();
  }
  std::ostringstream m;
  m << what << ": max|out-ref| = " << s.max_err << " (at " << s.worst_index << "), tol = " << s.tol
    << ", max|naive-ref| = " << s.naive_err << ", max|ref| = " << s.max_ref;
  if (s.judged_err != s.max_err) m << ", less half an ulp: " << s.judged_err;
  if (s.bad) {
    return ::testing::AssertionFailure()
           << m.str() << "; " << s.bad << " elements NaN/inf or -inf mismatched, first at "
           << s.first_bad << ": out " << out[s.first_bad] << " ref " << ref[s.first_bad];
  }
  if (!s.pass()) {
    return ::testing::AssertionFailure() << m.str() << "; out " << out[s.worst_index] << " ref "
                                         << ref[s.worst_index];
  }
  if (std::getenv("FA_TEST_VERBOSE")) std::printf("[ rule ] %s\n", m.str().c_str());
  return ::testing::AssertionSuccess() << m.str();
}

}  // namespace

::testing::AssertionResult within_rule(const std::string& what, flashattn::DType dt,
                                       const std::vector<double>& out,
                                       const std::vector<double>& ref,
                                       const std::vector<double>& naive, int64_t reduce_len,
                                       int64_t head_dim, double magnitude) {
  return verdict(what,
                 flashattn::reference::judge(dt, out, ref, naive, reduce_len, head_dim, magnitude),
                 out, ref);
}

::testing::AssertionResult lse_within_rule(const std::string& what, const std::vector<double>& out,
                                           const std::vector<double>& ref,
                                           const std::vector<double>& naive, int64_t head_dim,
                                           double score_err) {
  return verdict(what, flashattn::reference::judge_lse(out, ref, naive, head_dim, score_err), out,
                 ref);
}

}  // namespace fa_test
