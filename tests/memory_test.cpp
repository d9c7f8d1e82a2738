// Extra memory is O(N): a 32k-token forward runs under an address-space limit
// far below what an N x N score matrix would need, and the workspace the API
// reports grows linearly with the sequence length.
#include <gtest/gtest.h>

#include <omp.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <limits>
#include <vector>

#include "support/check.hpp"
#include "support/harness.hpp"

namespace fa_test {
namespace {

constexpr int64_t kTokens = 32768;
constexpr int64_t kDim = 64;

size_t address_space_bytes() {
  std::ifstream f("/proc/self/statm");
  size_t pages = 0;
  f >> pages;
  return pages * static_cast<size_t>(sysconf(_SC_PAGESIZE));
}

// One query row against all keys, in double: the reference for a single row,
// so that checking a 32k problem costs O(N d), not O(N^2 d).
void row_reference(const Case& c, const std::vector<double>& q, const std::vector<double>& k,
                   const std::vector<double>& v, int64_t i, std::vector<double>* out,
                   double* lse) {
  const int64_t D = c.head_dim, Sk = c.seqlen_k;
  const double scale = 1.0 / std::sqrt(static_cast<double>(D));
  const int64_t last = c.causal ? i + Sk - c.seqlen_q : Sk - 1;  // B = H = 1
  std::vector<double> s(static_cast<size_t>(last + 1));
  double m = -std::numeric_limits<double>::infinity();
  for (int64_t j = 0; j <= last; ++j) {
    double dot = 0;
    for (int64_t d = 0; d < D; ++d) dot += q[i * D + d] * k[j * D + d];
    s[j] = scale * dot;
    m = std::max(m, s[j]);
  }
  double sum = 0;
  for (double x : s) sum += std::exp(x - m);
  out->assign(static_cast<size_t>(D), 0.0);
  for (int64_t j = 0; j <= last; ++j) {
    const double p = std::exp(s[j] - m) / sum;
    for (int64_t d = 0; d < D; ++d) (*out)[d] += p * v[j * D + d];
  }
  *lse = m + std::log(sum);
}

Case long_case() {
  Case c;
  c.dtype = DType::F32;
  c.seqlen_q = c.seqlen_k = kTokens;
  c.head_dim = kDim;
  c.causal = true;
  return c;
}

// Runs in a fresh process (see Memory.Forward32kTokensInBoundedAddressSpace):
// the limit must be set before OpenMP starts its threads, and libgomp is not
// safe to use after a plain fork of a process that already ran it.
TEST(MemoryChild, DISABLED_Forward32kTokens) {
  if (!std::getenv("FA_MEMORY_CHILD")) GTEST_SKIP() << "runs as the child of Memory.*";
  const Case c = long_case();
  Instance in = make_instance(Device::CPU, c, false);
  // Margin: 1.5 GiB plus thread stacks; one N x N fp32 matrix alone would be
  // 4 GiB (2 GiB in half precision), so an O(N^2) workspace cannot fit.
  const size_t margin = (size_t(3) << 29) + size_t(omp_get_max_threads()) * (size_t(16) << 20);
  rlimit old{};
  ASSERT_EQ(getrlimit(RLIMIT_AS, &old), 0);
  rlimit lim = old;
  lim.rlim_cur = address_space_bytes() + margin;
  ASSERT_EQ(setrlimit(RLIMIT_AS, &lim), 0);
  const flashattn::Status st = flashattn::forward(in.fwd_args());
  // The limit is real: one N x N fp32 score matrix cannot be allocated under it.
  void* nxn = std::malloc(size_t(kTokens) * size_t(kTokens) * sizeof(float));
  const bool nxn_fits = nxn != nullptr;
  std::free(nxn);
  ASSERT_EQ(setrlimit(RLIMIT_AS, &old), 0);  // soft limit only: can be restored
  EXPECT_FALSE(nxn_fits) << "the address-space limit would not stop an O(N^2) buffer";
  ASSERT_TRUE(st.ok()) << st.message;

  const std::vector<double> out = in.out.read(), lse = in.lse.read();
  for (int64_t i : {int64_t(0), int64_t(1), int64_t(4095), int64_t(20001), kTokens - 1}) {
    std::vector<double> ref;
    double ref_lse;
    row_reference(c, in.q, in.k, in.v, i, &ref, &ref_lse);
    const std::vector<double> got(out.begin() + i * kDim, out.begin() + (i + 1) * kDim);
    EXPECT_TRUE(within_rule("out row " + std::to_string(i), c.dtype, got, ref, {}, i + 1, kDim,
                            magnitudes(in).out));
    EXPECT_TRUE(lse_within_rule("lse row " + std::to_string(i), {lse[i]}, {ref_lse}, {}, kDim));
  }
}

TEST(Memory, Forward32kTokensInBoundedAddressSpace) {
  const pid_t pid = fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    setenv("FA_MEMORY_CHILD", "1", 1);
    setenv("MALLOC_ARENA_MAX", "2", 1);  // keep per-thread malloc arenas out of the budget
    char filter[] = "--gtest_filter=MemoryChild.DISABLED_Forward32kTokens";
    char disabled[] = "--gtest_also_run_disabled_tests";
    char self[] = "flashattn_tests";
    char* argv[] = {self, filter, disabled, nullptr};
    execv("/proc/self/exe", argv);
    _exit(127);
  }
  int status = 0;
  ASSERT_EQ(waitpid(pid, &status, 0), pid);
  ASSERT_TRUE(WIFEXITED(status)) << "child killed by signal " << WTERMSIG(status)
                                 << " (an allocation beyond the O(N) budget?)";
  EXPECT_EQ(WEXITSTATUS(status), 0) << "child failed: see its output above";
}

// The workspace the API reports (and allocates) grows like N, not N^2.
TEST(Memory, WorkspaceGrowsLinearly) {
  auto ws = [](int64_t n, bool backward) {
    Case c = long_case();
    c.seqlen_q = c.seqlen_k = n;
    c.heads_q = 2;
    c.heads_kv = 1;
    c.dtype = DType::BF16;
    Instance in;
    in.dev = Device::CPU;
    in.c = c;
    // Real (unfilled) memory: the checks look at pointers and address ranges.
    in.in = make_qkv(Device::CPU, c.dtype, Layout::BSHD, 1, n, n, 2, 1, kDim);
    in.out = make_bshd(Device::CPU, c.dtype, Layout::BSHD, 1, n, 2, kDim);
    in.dout = make_bshd(Device::CPU, c.dtype, Layout::BSHD, 1, n, 2, kDim);
    in.lse = make_lse(Device::CPU, 1, 2, n);
    in.grad = make_qkv(Device::CPU, c.dtype, Layout::BSHD, 1, n, n, 2, 1, kDim);
    size_t bytes = 0;
    const flashattn::Status st = backward
                                     ? flashattn::backward_workspace_bytes(in.bwd_args(), &bytes)
                                     : flashattn::forward_workspace_bytes(in.fwd_args(), &bytes);
    EXPECT_TRUE(st.ok()) << st.message;
    return static_cast<double>(bytes);
  };
  for (bool backward : {false, true}) {
    SCOPED_TRACE(backward ? "backward" : "forward");
    const double a = ws(8192, backward), b = ws(16384, backward), c = ws(65536, backward);
    std::printf("%s workspace bytes: N=8192 %.0f, N=16384 %.0f, N=65536 %.0f\n",
                backward ? "backward" : "forward", a, b, c);
    // O(1) (a fixed per-thread tile) is fine, O(N) is fine, O(N^2) is not.
    if (a > 0) {
      EXPECT_LE(b / a, 2.5) << "doubling N must at most double the workspace";
      EXPECT_LE(c / a, 8.0 * 1.25) << "8x N must at most multiply the workspace by 8";
    }
    // An N x N fp32 score matrix at N = 65536 would be 16 GiB; allow 1/64 of it.
    EXPECT_LT(c, 65536.0 * 65536.0 * 4 / 64);
  }
}

}  // namespace
}  // namespace fa_test
