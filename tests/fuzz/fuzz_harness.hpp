// The C ABI fuzz target's shared pieces (c_api_fuzz.cpp: padded calls and the
// oracle; c_api_fuzz_varlen.cpp: variable-length batches): the input-byte
// reader, tensors over owned or fake storage, their layouts and fills, the
// reference's view of a call, and the checks every call ends in.
#pragma once

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "flashattn/flashattn.h"
#include "reference/naive_same_dtype.hpp"
#include "reference/reference.hpp"
#include "reference/rule.hpp"
#include "support/half.hpp"

namespace fa_fuzz {

inline std::string g_case;  // the call being checked, printed with a failure

[[noreturn]] inline void fail(const char* what, const std::string& detail) {
  std::fprintf(stderr, "fuzz oracle failed: %s: %s\n  call: %s\n", what, detail.c_str(), g_case.c_str());
  std::fflush(stderr);
  std::abort();
}
#define FUZZ_CHECK(cond, detail) \
  do {                           \
    if (!(cond)) fail(#cond, detail); \
  } while (0)

// Reads decisions from the input; past its end every read returns 0, so any
// prefix of an interesting input is a valid (simpler) input too.
struct Bytes {
  const uint8_t* p;
  size_t n, at = 0;
  uint8_t u8() { return at < n ? p[at++] : 0; }
  uint32_t u32() {
    uint32_t x = 0;
    for (int i = 0; i < 4; ++i) x = x << 8 | u8();
    return x;
  }
  int64_t below(int64_t m) { return m <= 1 ? 0 : int64_t(u8()) % m; }
  bool chance(int in256) { return u8() < in256; }
};

constexpr int64_t kHuge = int64_t(1) << 48;  // the API's size limit (checks.cpp)

inline size_t esize(int32_t dt) { return dt == FA_F32 ? 4 : dt == FA_F8E4M3 ? 1 : 2; }

// A tensor's storage: its own heap block, or a view into another's.
struct Storage {
  std::unique_ptr<uint8_t[]> bytes;
  size_t size = 0;
};

struct T {
  fa_tensor t{};
  std::shared_ptr<Storage> st;  // null: fake or null pointer (never touched)
  size_t off = 0;               // bytes from st's start
  // The dims the harness itself walks: a mutated ndim (5, -1) is for the
  // API to refuse; fa_tensor holds 4 shape and stride entries.
  int dims() const { return t.ndim < 0 ? 0 : t.ndim > 4 ? 4 : t.ndim; }
  int64_t span() const {        // elements from data to the last one, + 1
    int64_t last = 0;
    for (int i = 0; i < dims(); ++i) {
      if (t.shape[i] == 0) return 0;
      last += (t.shape[i] - 1) * t.stride[i];
    }
    return last + 1;
  }
  int64_t numel() const {  // saturating: mutated shapes may be absurd
    int64_t n = 1;
    for (int i = 0; i < dims(); ++i)
      if (__builtin_mul_overflow(n, t.shape[i], &n)) return INT64_MAX;
    return n;
  }
  // Element offsets of the logical elements, dense row-major order.
  std::vector<int64_t> offsets() const {
    std::vector<int64_t> o;
    const int64_t n = numel();
    o.reserve(size_t(n));
    int64_t idx[4] = {0, 0, 0, 0};
    for (int64_t e = 0; e < n; ++e) {
      int64_t at = 0;
      for (int i = 0; i < dims(); ++i) at += idx[i] * t.stride[i];
      o.push_back(at);
      for (int i = dims() - 1; i >= 0; --i) {
        if (++idx[i] < t.shape[i]) break;
        idx[i] = 0;
      }
    }
    return o;
  }
};

inline double load(int32_t dt, const uint8_t* p) {
  if (dt == FA_F8E4M3) return fa_test::e4m3_bits_to_float(*p);
  if (dt == FA_F32) {
    float f;
    std::memcpy(&f, p, 4);
    return f;
  }
  uint16_t h;
  std::memcpy(&h, p, 2);
  return dt == FA_F16 ? fa_test::half_to_float(h) : fa_test::bf16_to_float(h);
}
inline void store(int32_t dt, uint8_t* p, float f) {
  if (dt == FA_F8E4M3) {
    *p = fa_test::float_to_e4m3_bits(f);
    return;
  }
  if (dt == FA_F32) {
    std::memcpy(p, &f, 4);
    return;
  }
  const uint16_t h = dt == FA_F16 ? fa_test::float_to_half(f) : fa_test::float_to_bf16(f);
  std::memcpy(p, &h, 2);
}

inline std::vector<double> read_dense(const T& x) {
  std::vector<double> v;
  const uint8_t* base = x.st->bytes.get() + x.off;
  const size_t es = esize(x.t.dtype);
  for (int64_t o : x.offsets()) v.push_back(load(x.t.dtype, base + size_t(o) * es));
  return v;
}

// Strides for a [B, S, H, D] tensor: the three outer dims in a fuzzed order,
// each with optional padding; head dim contiguous. Never self-overlapping.
inline void layout(Bytes& in, T& x, const int64_t shape[4]) {
  x.t.ndim = 4;
  for (int i = 0; i < 4; ++i) x.t.shape[i] = shape[i];
  static const int kOrders[4][3] = {{2, 1, 0}, {1, 2, 0}, {2, 0, 1}, {0, 2, 1}};  // inner -> outer
  const int* order = kOrders[in.below(4)];
  x.t.stride[3] = 1;
  int64_t inner = shape[3] + (in.chance(64) ? 8 * in.below(3) + in.below(2) : 0);
  for (int k = 0; k < 3; ++k) {
    const int d = order[k];
    x.t.stride[d] = inner;
    inner = inner * std::max<int64_t>(shape[d], 1) + (in.chance(48) ? in.below(24) : 0);
  }
}

inline void allocate(Bytes& in, T& x, bool fill, std::mt19937& rng, float amp) {
  const size_t es = esize(x.t.dtype);
  const size_t lead = size_t(in.below(4));  // misaligned starts are legal
  auto st = std::make_shared<Storage>();
  st->size = (lead + size_t(x.span())) * es + 1;
  st->bytes.reset(new uint8_t[st->size]);
  std::normal_distribution<float> nd(0.0f, amp);
  if (fill) {
    for (size_t e = 0; e + es <= st->size; e += es) store(x.t.dtype, st->bytes.get() + e, nd(rng));
  } else {
    std::memset(st->bytes.get(), 0xff, st->size);  // NaN in every dtype: the poison
  }
  x.st = st;
  x.off = lead * es;
  x.t.data = st->bytes.get() + x.off;
}

struct Problem {
  int op = 0;  // 0 forward, 1 backward, 2 forward workspace, 3 backward workspace
  int32_t dtype = FA_F16;
  int64_t B = 1, Sq = 1, Sk = 1, Hq = 1, Hkv = 1, D = 8;
  int64_t Dv = 8;  // v / out / dout / dv's head dim (a quarter of the non-fp8 calls: != D)
  fa_options opt{};
  bool with_lse = true;
  // fp8 forward (fa_forward_fp8): q, k, v e4m3, out bf16, per-tensor
  // descales (0 = that factor absent); scales == false passes NULL scales.
  bool fp8 = false, scales = false;
  float descale[3] = {0, 0, 0};
};

// %g keeps a denormal or tiny option visible (std::to_string prints 0.000000).
inline std::string g_fmt(double x) {
  char b[32];
  std::snprintf(b, sizeof b, "%g", x);
  return b;
}

inline float fuzz_float(Bytes& in, bool allow_bad) {
  switch (in.below(allow_bad ? 10 : 6)) {
    case 0: return 0.0f;
    case 1: return 0.05f + float(in.u8()) / 64.0f;
    case 2: return float(in.u8() + 1) / 8.0f;
    case 3: return std::numeric_limits<float>::denorm_min();
    case 4: return 1.0f;
    case 5: return float(in.u32() % 100000) / 1000.0f;
    case 6: return std::numeric_limits<float>::quiet_NaN();
    case 7: return std::numeric_limits<float>::infinity();
    case 8: return -float(in.u8() + 1);
    default: return -std::numeric_limits<float>::infinity();
  }
}

inline int64_t fuzz_window(Bytes& in, int64_t S) {
  switch (in.below(5)) {
    case 0:
    case 1: return -1;
    case 2: return in.below(S + 3);
    case 3: return std::numeric_limits<int64_t>::max();
    default: return kHuge + int64_t(in.u8());
  }
}

// The reference's view of the options: a window >= the sequence is unbounded.
inline flashattn::reference::Problem ref_problem(const Problem& pb) {
  flashattn::reference::Problem r;
  r.batch = pb.B;
  r.seqlen_q = pb.Sq;
  r.seqlen_k = pb.Sk;
  r.heads_q = pb.Hq;
  r.heads_kv = pb.Hkv;
  r.head_dim = pb.D;
  r.head_dim_v = pb.Dv;
  r.scale = pb.opt.softmax_scale;
  r.softcap = pb.opt.softcap;
  r.causal = pb.opt.causal != 0;
  r.window_left = pb.opt.window_left >= pb.Sk + pb.Sq ? -1 : pb.opt.window_left;
  r.window_right = pb.opt.window_right >= pb.Sk + pb.Sq ? -1 : pb.opt.window_right;
  return r;
}

inline void expect_rule(const char* what, int32_t dt, const std::vector<double>& out,
                 const std::vector<double>& ref, const std::vector<double>& naive, int64_t L,
                 int64_t D, double mag) {
  const auto dtype = static_cast<flashattn::DType>(dt);
  const auto s = flashattn::reference::judge(dtype, out, ref, dt == FA_F32 ? std::vector<double>{} : naive,
                                             L, D, mag);
  // Below two fp32 subnormal steps no kernel can do better (tiny results,
  // e.g. gradients of ~1e-44): the rule's relative bounds do not reach there.
  const bool below_fp32 = !s.size_mismatch && s.bad == 0 &&
                          s.max_err <= 2.0 * std::numeric_limits<float>::denorm_min();
  if (!s.pass() && !below_fp32) {
    char buf[320];
    const int64_t w = s.worst_index;
    const bool has = w >= 0 && size_t(w) < out.size();
    std::snprintf(buf, sizeof buf,
                  "max_err %.3g judged %.3g tol %.3g (max_ref %.3g naive_err %.3g) bad %lld at %lld: "
                  "out %.6g ref %.6g naive %.6g",
                  s.max_err, s.judged_err, s.tol, s.max_ref, s.naive_err, (long long)s.bad, (long long)w,
                  has ? out[size_t(w)] : 0.0, has ? ref[size_t(w)] : 0.0,
                  has && size_t(w) < naive.size() ? naive[size_t(w)] : 0.0);
    fail(what, buf);
  }
}

// Every logical element written (no poison left), every other byte intact.
inline void expect_written_exactly(const char* what, const T& x) {
  const size_t es = esize(x.t.dtype);
  std::vector<uint8_t> mine(x.st->size, 0);
  for (int64_t o : x.offsets()) std::memset(mine.data() + x.off + size_t(o) * es, 1, es);
  for (size_t b = 0; b < x.st->size; ++b) {
    if (!mine[b] && x.st->bytes[b] != 0xff) fail(what, "wrote outside its elements at byte " + std::to_string(b));
  }
  for (int64_t o : x.offsets()) {
    const uint8_t* p = x.st->bytes.get() + x.off + size_t(o) * es;
    bool poison = true;
    for (size_t i = 0; i < es; ++i) poison = poison && p[i] == 0xff;
    if (poison) fail(what, "element at offset " + std::to_string(o) + " not written");
  }
}

struct Snapshot {
  std::vector<std::pair<std::shared_ptr<Storage>, std::vector<uint8_t>>> bufs;
  void add(const T& x) {
    if (!x.st) return;
    for (auto& b : bufs)
      if (b.first == x.st) return;
    bufs.emplace_back(x.st, std::vector<uint8_t>(x.st->bytes.get(), x.st->bytes.get() + x.st->size));
  }
  bool unchanged() const {
    for (auto& b : bufs)
      if (std::memcmp(b.first->bytes.get(), b.second.data(), b.second.size()) != 0) return false;
    return true;
  }
};

// The call's status: one with mutations must be refused with a message and
// leave every byte as it was (false: nothing more to check); a valid one
// must succeed and clear fa_last_error (true: judge its results).
inline bool expect_status(fa_status st, int mutations, const Snapshot& snap) {
  const std::string msg = fa_last_error();
  if (mutations > 0) {
    FUZZ_CHECK(st != FA_OK, "an invalid call was accepted");
    FUZZ_CHECK(!msg.empty(), "refused without a message");
    FUZZ_CHECK(snap.unchanged(), "a refused call changed memory: " + msg);
    return false;
  }
  FUZZ_CHECK(st == FA_OK, "a valid call was refused: " + msg);
  FUZZ_CHECK(msg.empty(), "fa_last_error not cleared after success: " + msg);
  return true;
}

// The storage of every tensor in `ins` as the snapshot holds it.
inline void expect_inputs_intact(const Snapshot& snap, const std::vector<const T*>& ins) {
  for (const auto& b : snap.bufs) {
    bool is_input = false;
    for (const T* t : ins) is_input = is_input || t->st == b.first;
    if (is_input && std::memcmp(b.first->bytes.get(), b.second.data(), b.second.size()) != 0)
      fail("inputs", "an input buffer changed");
  }
}

// A forward wrote exactly out (and lse when returned); a backward dq, dk, dv.
inline void expect_outputs_written(bool bwd, bool with_lse, const T& out, const T& lse, const T& dq,
                                   const T& dk, const T& dv) {
  if (bwd) {
    expect_written_exactly("dq", dq);
    expect_written_exactly("dk", dk);
    expect_written_exactly("dv", dv);
  } else {
    expect_written_exactly("out", out);
    if (with_lse) expect_written_exactly("lse", lse);
  }
}

// One call's tensors in float64, dense row-major ([B, S, H, D]; lse [B, Hq,
// Sq]). Forward: out, and lse when returned. Backward: out (the O it was
// given), dout, dq, dk, dv.
struct Dense {
  std::vector<double> q, k, v, out, lse, dout, dq, dk, dv;
};

// fp8 with descales: q, k, v times their factors (exact in double).
inline void dequantise(const Problem& pb, Dense* d) {
  if (!pb.fp8 || !pb.scales) return;
  std::vector<double>* x[3] = {&d->q, &d->k, &d->v};
  for (int i = 0; i < 3; ++i)
    if (pb.descale[i] != 0.0f)
      for (double& e : *x[i]) e *= double(pb.descale[i]);
}

// A call's tensors read back (q, k, v dequantised; the backward's dout, dq,
// dk, dv when bwd; lse when pb.with_lse), in their own layouts' dense order.
inline Dense read_call(const Problem& pb, bool bwd, const T& q, const T& k, const T& v, const T& out,
                       const T& lse, const T& dout, const T& dq, const T& dk, const T& dv) {
  Dense d;
  d.q = read_dense(q);
  d.k = read_dense(k);
  d.v = read_dense(v);
  dequantise(pb, &d);
  d.out = read_dense(out);
  if (pb.with_lse) d.lse = read_dense(lse);
  if (bwd) {
    d.dout = read_dense(dout);
    d.dq = read_dense(dq);
    d.dk = read_dense(dk);
    d.dv = read_dense(dv);
  }
  return d;
}

// The oracle for a call that ran (pb.op 0 or 1): finite outputs, and
// DESIGN.md's rule against the fp64 reference where it applies.
void judge(const Problem& pb, const Dense& d);

// A variable-length call (fa_forward_varlen / _fp8, fa_backward_varlen) of
// pb's kind: c_api_fuzz_varlen.cpp.
void run_varlen(Bytes& in, const Problem& pb, std::mt19937& rng, std::mt19937& pick, float amp);

// A KV-cache call (fa_forward_kvcache) with pb's dtype, heads, head dim and
// options: c_api_fuzz_kvcache.cpp.
void run_kvcache(Bytes& in, const Problem& pb, std::mt19937& rng, std::mt19937& pick, float amp);

}  // namespace fa_fuzz
