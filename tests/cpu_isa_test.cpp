// Each CPU SIMD path forced through FLASHATTN_CPU_ISA, against the fp64
// reference under the rule (support/check.hpp): AMX tiles (bf16), AVX512-BF16
// dot products (bf16), AVX-512, AVX2 (16 vector registers: its own register
// blocking, e.g. dot_rows' column passes) and scalar.
// The paths the host does not pick by default would otherwise be tested only
// on other machines. A forced path the CPU lacks is skipped, never lowered
// silently: the test asks the backend which path it really runs.
#include <gtest/gtest.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <tuple>
#include <vector>

#include "cpu/cpu_backend.hpp"
#include "cpu/kernel_table.hpp"
#include "support/harness.hpp"
#include "support/varlen.hpp"

#if defined(__x86_64__)
#include <cpuid.h>
#endif

namespace fa_test {
namespace {

// Sets an environment variable for one test (nullptr: unsets it) and
// restores the caller's value.
class EnvScope {
 public:
  EnvScope(const char* name, const char* value) : name_(name) {
    if (const char* old = std::getenv(name)) saved_ = old, had_ = true;
    value ? setenv(name, value, 1) : unsetenv(name);
  }
  ~EnvScope() { had_ ? setenv(name_.c_str(), saved_.c_str(), 1) : unsetenv(name_.c_str()); }

 private:
  std::string name_, saved_;
  bool had_ = false;
};

// FLASHATTN_CPU_ISA for one test.
class IsaScope : public EnvScope {
 public:
  explicit IsaScope(const char* isa) : EnvScope("FLASHATTN_CPU_ISA", isa) {}
};

Case make(DType dt, int64_t d, int64_t sq, int64_t sk, int64_t hq, int64_t hkv, bool causal,
          Layout layout = Layout::BSHD, int64_t batch = 1) {
  Case c;
  c.dtype = dt;
  c.head_dim = d;
  c.seqlen_q = sq;
  c.seqlen_k = sk;
  c.heads_q = hq;
  c.heads_kv = hkv;
  c.causal = causal;
  c.layout = layout;
  c.batch = batch;
  return c;
}

// Odd lengths around the tile edges (16/32-row AMX blocks, 64/128 key tiles,
// 256 query tiles), Sq != Sk both ways, GQA and MQA, causal with rows that
// see no key (Sq > Sk), head dims 64/128/256 and small odd ones (zero padded
// to the 32-element tile depth).
std::vector<Case> isa_cases() {
  std::vector<Case> v;
  for (DType dt : {DType::BF16, DType::F16, DType::F32}) {
    v.push_back(make(dt, 128, 267, 267, 2, 1, false));
    v.push_back(make(dt, 128, 300, 113, 4, 2, true));  // rows 0..186 see no key
    // Decode with 8 query heads per KV head: dot_rows' 8 columns (on AVX2 two
    // passes of 4 over 3 key rows at a time, then a 1-row tail: 1030 = 16 x 64 + 6).
    v.push_back(make(dt, 128, 1, 1030, 16, 2, false));
    // A decode step with softcap (the two-key softmax caps each pair of keys
    // and the odd last key of 333 = 5 x 64 + 13 alone).
    Case dsc = make(dt, 128, 1, 333, 8, 1, false);
    dsc.softcap = 20.0f;
    v.push_back(dsc);
    // Decode with a head dim that is not whole 32-element vectors (bf16 on
    // the widening kernels, not VDPBF16PS): 80 = 64 + 16 columns of P V, 3
    // and 8 query rows per group, 4 and 2 KV heads per task, partial last
    // tiles (777 = 12 x 64 + 9, 1030 = 16 x 64 + 6).
    v.push_back(make(dt, 80, 1, 777, 12, 4, false));
    v.push_back(make(dt, 80, 1, 1030, 16, 2, false));
    if (dt != DType::BF16) continue;
    v.push_back(make(dt, 64, 1, 517, 4, 2, true));  // decode, 2 columns (5 key rows at a time on AVX2)
    v.push_back(make(dt, 64, 113, 1030, 4, 1, false, Layout::BHSD));
    v.push_back(make(dt, 64, 1, 1030, 8, 2, true));  // decode: packed GQA, split KV
    // Decode on VDPBF16PS (the avx512_bf16 path): 1-8 query rows per group
    // (every pv_dpbf16 row count), head dims 32-256 in 32-element vectors,
    // odd key counts (the last tile converted), 48 (not whole 32-element
    // vectors: the widening kernels), rows that see no key (Sq 3 > Sk 2).
    v.push_back(make(dt, 96, 1, 333, 6, 2, false));   // 3 rows
    v.push_back(make(dt, 256, 1, 701, 5, 1, true));   // 5 rows
    v.push_back(make(dt, 32, 1, 129, 14, 2, false));  // 7 rows
    v.push_back(make(dt, 128, 2, 1030, 8, 2, true));  // 2 x 4 = 8 rows
    v.push_back(make(dt, 64, 3, 2, 2, 1, true));      // 6 rows, row 0 sees no key
    v.push_back(make(dt, 48, 1, 200, 6, 1, false));   // 6 rows, widened
    // Decode on AMX tiles (the amx path): 4 query rows per group, the least
    // that takes P V onto the tiles (kPvAmxMinRows), with a last tile of 2
    // keys (1090 = 17 x 64 + 2: no whole 16-key block for the tile scores, one
    // key pair for P V) and of 33 keys (673 = 10 x 64 + 33: a second 32-key
    // block holding one key).
    v.push_back(make(dt, 128, 1, 1090, 16, 4, false));
    v.push_back(make(dt, 64, 1, 673, 8, 2, true));
    v.push_back(make(dt, 256, 17, 267, 2, 2, true, Layout::Packed, 2));
    v.push_back(make(dt, 256, 129, 33, 2, 1, false, Layout::Padded));
    v.push_back(make(dt, 8, 113, 17, 2, 2, true));
    v.push_back(make(dt, 40, 65, 97, 3, 1, false));
    v.push_back(make(dt, 72, 31, 31, 2, 2, true, Layout::BHSD));
    v.push_back(make(dt, 128, 1, 1, 1, 1, false));
    Case w = make(dt, 128, 200, 300, 2, 1, true);
    w.window_left = 37;
    w.window_right = 5;
    v.push_back(w);
    Case sc = make(dt, 64, 150, 150, 2, 2, false);
    sc.softcap = 30.0f;
    v.push_back(sc);
  }
  return v;
}

using IsaCase = std::tuple<const char*, Case>;

std::string isa_case_name(const ::testing::TestParamInfo<IsaCase>& info) {
  return std::string(std::get<0>(info.param)) + "_" + std::get<1>(info.param).name();
}

// Empty when the forced path is the one the backend runs; else why not.
std::string missing(const std::string& want) {
  const std::string got = flashattn::detail::cpu::isa_name();
  if (got == want) return {};
  return "this CPU cannot run the " + want + " path (best available: " + got +
         "); amx needs amx_tile + amx_bf16 + avx512_bf16 and Linux >= 5.16, avx512_bf16 "
         "needs avx512_bf16";
}

class CpuIsa : public ::testing::TestWithParam<IsaCase> {};

TEST_P(CpuIsa, Forward) {
  IsaScope scope(std::get<0>(GetParam()));
  const std::string why = missing(std::get<0>(GetParam()));
  if (!why.empty()) GTEST_SKIP() << why;
  check_forward(Device::CPU, std::get<1>(GetParam()));
}

TEST_P(CpuIsa, Backward) {
  IsaScope scope(std::get<0>(GetParam()));
  const std::string why = missing(std::get<0>(GetParam()));
  if (!why.empty()) GTEST_SKIP() << why;
  check_backward(Device::CPU, std::get<1>(GetParam()));
}

// Paged KV-cache decode steps, whose tiles the decode path reads in place one
// run of rows per page (forward.hpp for_runs): pages of 16 rows (four runs per
// 64-key tile) and of 48 (tile boundaries inside pages), odd key counts (a
// last run of odd length: VDPBF16PS's P V takes even runs, the rest the
// widening one), GQA groups of 8 and 2, split-KV, NaN in every cache row a
// sequence does not see, a zero-length cache.
std::vector<KvCase> isa_paged_cases() {
  std::vector<KvCase> v;
  for (DType dt : {DType::BF16, DType::F16, DType::F32}) {
    for (int64_t page : {16, 48}) {
      KvCase c;
      c.dtype = dt;
      c.seqlen_q = 1;
      c.heads_q = 16;
      c.heads_kv = 2;
      c.head_dim = 128;
      c.cache_lens = {1001, 70, 0};
      c.capacity = 1056;
      c.page_size = page;
      v.push_back(c);
      KvCase n = c;  // group 2, head dim 64, one appended token, 3 pieces
      n.heads_q = 4;
      n.head_dim = 64;
      n.cache_lens = {333, 8};
      n.s_new = 1;
      n.capacity = 384;
      n.num_splits = 3;
      n.nan_outside = true;
      v.push_back(n);
    }
  }
  return v;
}

using IsaKvCase = std::tuple<const char*, KvCase>;

class CpuIsaKv : public ::testing::TestWithParam<IsaKvCase> {};

TEST_P(CpuIsaKv, PagedDecode) {
  IsaScope scope(std::get<0>(GetParam()));
  const std::string why = missing(std::get<0>(GetParam()));
  if (!why.empty()) GTEST_SKIP() << why;
  check_kvcache(Device::CPU, std::get<1>(GetParam()));
}

// CPUID leaf 0's vendor string is "AuthenticAMD".
bool cpu_is_amd() {
#if defined(__x86_64__)
  unsigned a = 0, regs[3] = {};
  if (!__get_cpuid(0, &a, &regs[0], &regs[2], &regs[1])) return false;  // EBX, EDX, ECX
  return std::memcmp(regs, "AuthenticAMD", 12) == 0;
#else
  return false;
#endif
}

// The default path (FLASHATTN_CPU_ISA unset): below AMX, the AVX512-BF16 path
// on AMD CPUs that have it (its bf16 GEMMs measured 1.4-2.1x the AVX-512
// path's on Zen 4), and never on other vendors (0.6-0.7x on Intel;
// bench/NOTES.md).
TEST(CpuIsaDefault, Avx512Bf16OnAmdOnly) {
  bool bf16_path = false;
  {
    IsaScope forced("avx512_bf16");
    bf16_path = std::string(flashattn::detail::cpu::isa_name()) == "avx512_bf16";
  }
  IsaScope scope(nullptr);
  const std::string got = flashattn::detail::cpu::isa_name();
  if (got == "amx") GTEST_SKIP() << "this CPU has AMX: bf16 runs on tiles by default";
  if (cpu_is_amd() && bf16_path) {
    EXPECT_EQ(got, "avx512_bf16");
  } else {
    EXPECT_NE(got, "avx512_bf16");
  }
}

// A decode step's prefetches of the next K / V tile go to L2 only on Zen 4
// (kernel_table.hpp decode_prefetch_rule; bench/NOTES.md, "Decode
// prefetches into L2 on Zen 4"): the rule, its override, and decode steps
// under both settings against the reference (a prefetch changes no result;
// this runs both branches of the prefetcher on every path of this CPU).
TEST(CpuDecodePrefetch, L2OnZen4Only) {
  using flashattn::detail::cpu::decode_prefetch_rule;
  EXPECT_TRUE(decode_prefetch_rule(nullptr, true, 0x19, true));    // Zen 4
  EXPECT_FALSE(decode_prefetch_rule(nullptr, true, 0x19, false));  // Zen 3
  EXPECT_FALSE(decode_prefetch_rule(nullptr, true, 0x1a, true));   // Zen 5
  EXPECT_FALSE(decode_prefetch_rule(nullptr, false, 6, true));     // an Intel Xeon
  EXPECT_FALSE(decode_prefetch_rule("l1", true, 0x19, true));
  EXPECT_TRUE(decode_prefetch_rule("l2", false, 6, true));
  EXPECT_TRUE(decode_prefetch_rule("L2?", true, 0x19, true));  // not l1 / l2: the rule
}

TEST(CpuDecodePrefetch, BothSettingsMatchReference) {
  for (const char* where : {"l1", "l2"}) {
    EnvScope scope("FLASHATTN_CPU_DECODE_PREFETCH", where);
    EXPECT_EQ(flashattn::detail::cpu::decode_prefetch_to_l2(), std::string(where) == "l2");
    for (DType dt : {DType::BF16, DType::F32}) {
      KvCase c;  // 8 query heads per KV head, two sequences, split KV
      c.dtype = dt;
      c.heads_q = 16;
      c.heads_kv = 2;
      c.head_dim = 128;
      c.cache_lens = {1001, 333};
      c.capacity = 1024;
      c.num_splits = 3;
      SCOPED_TRACE(std::string(where) + " " + c.name());
      check_kvcache(Device::CPU, c);
    }
  }
}

// fp32 on the AMX tiles (three bf16 pieces a value, six piece products a
// GEMM: amx_tiles.hpp) is meant to be fp32 attention, not bf16x2: its errors
// should sit at the naive fp32's level (measured 0.4-0.8x of it; the FMA
// kernels 1.0-2.3x). The rule's fp32 bound is ~400x that, so a GEMM that
// lost a piece product (mid x mid, 2^-16 of |a| |b|: 2.5-4x the naive's
// error) would still pass the sweep; this pins the precision of the shapes
// that take the tiles by default (cpu/fp32_tiles_rule.hpp: a forward from
// 256 keys a row, a backward from 1024). 1.5x: twice the largest ratio seen.
constexpr double kTilesVsNaive = 1.5;

::testing::AssertionResult near_naive(const char* what, const std::vector<double>& out,
                                      const std::vector<double>& ref, const std::vector<double>& naive) {
  const flashattn::reference::ErrorStats e = flashattn::reference::measure(out, ref, naive);
  if (std::getenv("FA_TEST_VERBOSE")) {
    std::printf("%s: max|err| %.3g, naive %.3g (%.2fx)\n", what, e.max_err, e.naive_err, e.max_err / e.naive_err);
  }
  if (e.bad == 0 && e.max_err <= kTilesVsNaive * e.naive_err) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure() << what << ": max|err| " << e.max_err << " against the naive fp32's "
                                       << e.naive_err << " (bound " << kTilesVsNaive << "x, " << e.bad
                                       << " non-finite)";
}

TEST(CpuFp32Tiles, ErrorsAtTheNaiveFp32Level) {
  IsaScope scope(nullptr);
  if (std::string(flashattn::detail::cpu::isa_name()) != "amx") GTEST_SKIP() << "fp32 takes the tiles on AMX only";
  {
    // Forward: 1030 keys a row, GQA 2:1.
    Instance in = make_instance(Device::CPU, make(DType::F32, 128, 1030, 1030, 2, 1, false), false);
    ASSERT_TRUE(flashattn::forward(in.fwd_args()).ok());
    const Expected e = expected_forward(in);
    EXPECT_TRUE(near_naive("out", in.out.read(), e.out, e.naive_out));
  }
  {
    // Backward: 2048 keys a row (its forward too), head dim 64, Sq = Sk.
    Instance in = make_instance(Device::CPU, make(DType::F32, 64, 2048, 2048, 2, 1, false), true);
    ASSERT_TRUE(flashattn::forward(in.fwd_args()).ok());
    ASSERT_TRUE(flashattn::backward(in.bwd_args()).ok());
    const std::vector<double> given_out = in.out.read();
    const ExpectedGrads g = expected_backward(in, &given_out);
    EXPECT_TRUE(near_naive("dq", in.grad.q.read(), g.dq, g.naive_dq));
    EXPECT_TRUE(near_naive("dk", in.grad.k.read(), g.dk, g.naive_dk));
    EXPECT_TRUE(near_naive("dv", in.grad.v.read(), g.dv, g.naive_dv));
  }
}

INSTANTIATE_TEST_SUITE_P(Paths, CpuIsa,
                         ::testing::Combine(::testing::Values("amx", "avx512_bf16", "avx512", "avx2", "scalar"),
                                            ::testing::ValuesIn(isa_cases())),
                         isa_case_name);
INSTANTIATE_TEST_SUITE_P(Paths, CpuIsaKv,
                         ::testing::Combine(::testing::Values("amx", "avx512_bf16", "avx512", "avx2", "scalar"),
                                            ::testing::ValuesIn(isa_paged_cases())),
                         [](const ::testing::TestParamInfo<IsaKvCase>& info) {
                           return std::string(std::get<0>(info.param)) + "_" + std::get<1>(info.param).name();
                         });

}  // namespace
}  // namespace fa_test
