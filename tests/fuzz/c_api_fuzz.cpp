// libFuzzer target over the C ABI (include/flashattn/flashattn.h).
//
// The input bytes choose one call (forward, backward, or a workspace query;
// fp8 forwards; for a quarter of the forwards and backwards their
// variable-length forms, c_api_fuzz_varlen.cpp; for a fifth of the other
// forwards a KV-cache call, c_api_fuzz_kvcache.cpp),
// the shapes, strides (padded, permuted, zero, negative, overlapping), dtypes,
// options (scale / softcap / window incl. NaN, Inf, huge) and pointers, and
// then zero or more *mutations*, each of which makes the call invalid by the
// API's documented rules (wrong ndim, mismatched heads, null data, outputs
// overlapping inputs, sizes beyond 2^48, ...). The oracle:
//   - mutated call: a non-zero status, a non-empty fa_last_error(), and every
//     byte of every buffer (inputs and poisoned outputs) unchanged;
//   - valid small call: FA_OK, inputs and the gaps between output elements
//     unchanged, every output element written, and out / lse / dq / dk / dv
//     within DESIGN.md's rule of the fp64 reference (src/reference);
//   - valid call too large to run: only the workspace queries (which must not
//     touch data) run, on fake pointers, and must succeed.
// Fake pointers are used only where the library must not dereference: a
// refused call or an empty / workspace-only call.
//
// Built with -fsanitize=fuzzer (FLASHATTN_FUZZ) it is a libFuzzer target;
// built without, replay_main.cpp runs it over tests/fuzz/corpus in ctest.
#include "fuzz/fuzz_harness.hpp"

namespace fa_fuzz {

// ---- mutations: each one alone makes the call invalid -----------------------

enum Mutation {
  kNdim, kDtypeCode, kDtypeMismatch, kDevice, kNegShape, kNegStride, kBatch, kHeadDim,
  kHeadsKv, kHeadsZero, kHeadStride, kNullData, kOutShape, kLseShape, kLseStride, kLseDtype,
  kScale, kSoftcap, kWindow, kOverlapIn, kOverlapOut, kSelfOverlap, kHugeShape, kHugeStride,
  kWrapPointer, kNullLseBwd, kNullArgs, kNullBytes, kMutations
};

struct Call {
  Problem pb;
  T q, k, v, out, lse, dout, dq, dk, dv;
  T descale[3];  // fp8: fp32 [1] each (st null when absent)
  std::vector<T*> outputs() {
    if (pb.op == 0 || pb.op == 2) return {&out, &lse};
    return {&dq, &dk, &dv};
  }
  std::vector<T*> all() {
    return {&q, &k, &v, &out, &lse, &dout, &dq, &dk, &dv, &descale[0], &descale[1], &descale[2]};
  }
};

// Applies mutation m if it can apply to this call; returns whether it did.
bool mutate(Bytes& in, Call& c, int m, bool* null_args, bool* null_bytes) {
  const bool bwd = c.pb.op == 1 || c.pb.op == 3;
  std::vector<T*> io = {&c.q, &c.k, &c.v};
  for (T* o : c.outputs()) io.push_back(o);
  if (bwd) { io.push_back(&c.out); io.push_back(&c.dout); }
  T& x = *io[size_t(in.below(int64_t(io.size())))];
  const bool x_used = x.t.data != nullptr || &x != &c.lse;  // a forward's lse may be absent
  switch (m) {
    case kNdim:
      if (!x_used) return false;
      x.t.ndim = in.chance(128) ? x.t.ndim - 1 : (in.chance(128) ? 5 : -1);
      return true;
    case kDtypeCode: {
      if (!x_used) return false;
      const int32_t code = 3 + in.u8();
      // fp8 q/k/v drawn as fp8 again would stay valid: int32 then.
      x.t.dtype = code == x.t.dtype ? FA_I32 : code;
      return true;
    }
    case kDtypeMismatch:
      if (!x_used) return false;
      x.t.dtype = (x.t.dtype + 1 + int32_t(in.below(2))) % 3;
      return true;
    case kDevice:
      if (!x_used) return false;
      // A CUDA view of host memory is refused (mixed devices, or no CUDA
      // here); skipped where a device is present and all would be CUDA.
      if (fa_cuda_available()) return false;
      if (in.chance(128)) {
        x.t.device = 2 + in.u8();
      } else {
        for (T* t : c.all()) t->t.device = FA_CUDA;
      }
      return true;
    case kNegShape:
      if (!x_used || x.dims() == 0) return false;
      x.t.shape[in.below(x.dims())] = -1 - int64_t(in.u8());
      return true;
    case kNegStride:
      if (!x_used || x.dims() == 0) return false;
      x.t.stride[in.below(x.dims())] = -1 - int64_t(in.u8());
      return true;
    case kBatch:
      c.k.t.shape[0] += 1;
      return true;
    case kHeadDim:
      // With v's own head dim: out (the forward's output, the backward's
      // input) on q's instead, a multiple of 8 that does not match v.
      if (c.pb.Dv != c.pb.D && in.chance(128)) {
        c.out.t.shape[3] = c.pb.D;
        return true;
      }
      for (T* t : c.all())
        if (t != &c.lse) t->t.shape[3] = in.chance(128) ? c.pb.D + 1 + in.below(7) : 264;
      // Any head dim up to 256 runs where the tensors agree: k's then differs from q's.
      if (c.k.t.shape[3] == c.q.t.shape[3]) c.k.t.shape[3] += 1;
      return true;
    case kHeadsKv:  // Hq not a multiple of Hkv
      if (c.pb.Hq == 0) return false;
      c.k.t.shape[2] = c.v.t.shape[2] = c.pb.Hq + 1;
      return true;
    case kHeadsZero:
      if (c.pb.Hq == 0) return false;
      c.k.t.shape[2] = c.v.t.shape[2] = 0;
      return true;
    case kHeadStride:
      if (x.t.ndim != 4 || !x_used) return false;
      x.t.stride[3] = 2;
      return true;
    case kNullData:  // (a forward's lse may be null: that means "no lse")
      if (x.numel() == 0 || !x_used || (&x == &c.lse && !bwd)) return false;
      x.t.data = nullptr;
      x.st = nullptr;
      return true;
    case kOutShape: {
      T& o = bwd ? c.dq : c.out;
      o.t.shape[1 + in.below(2)] += 1;
      return true;
    }
    case kLseShape:
      if (!c.lse.t.data) return false;
      c.lse.t.shape[in.below(3)] += 1;
      return true;
    case kLseStride:
      if (!c.lse.t.data || c.pb.Sq < 2) return false;
      c.lse.t.stride[2] = 2;
      return true;
    case kLseDtype:
      if (!c.lse.t.data) return false;
      c.lse.t.dtype = FA_F16;
      return true;
    case kScale:
      c.pb.opt.softmax_scale = in.chance(128) ? std::numeric_limits<float>::quiet_NaN()
                                              : (in.chance(128) ? -1.0f : -std::numeric_limits<float>::infinity());
      return true;
    case kSoftcap:
      c.pb.opt.softcap = in.chance(128) ? std::numeric_limits<float>::infinity() : -0.5f;
      return true;
    case kWindow:
      (in.chance(128) ? c.pb.opt.window_left : c.pb.opt.window_right) =
          in.chance(200) ? -2 - int64_t(in.u8()) : std::numeric_limits<int64_t>::min();
      return true;
    case kOverlapIn: {  // an output starting inside an input
      T& o = *c.outputs()[size_t(in.below(bwd ? 3 : 1))];
      T& i = *io[size_t(in.below(3))];
      if (o.numel() == 0 || i.numel() == 0 || !i.st) return false;
      o.st = i.st;
      o.off = i.off;
      o.t.data = i.t.data;
      return true;
    }
    case kOverlapOut: {
      if (!bwd) {
        if (!c.lse.t.data || c.out.numel() == 0 || c.lse.numel() == 0) return false;
        c.lse.st = c.out.st;
        c.lse.off = c.out.off;
        c.lse.t.data = c.out.t.data;
        return true;
      }
      if (c.dk.numel() == 0 || c.dv.numel() == 0) return false;
      c.dv.st = c.dk.st;
      c.dv.off = c.dk.off;
      c.dv.t.data = c.dk.t.data;
      return true;
    }
    case kSelfOverlap: {  // an output whose elements collide
      T& o = bwd ? c.dk : c.out;
      for (int d = 0; d < 3; ++d) {
        if (o.t.shape[d] > 1 && o.numel() > 1) {
          o.t.stride[d] = in.chance(128) ? 0 : 1;
          return true;
        }
      }
      return false;
    }
    case kHugeShape:
      if (!x_used) return false;
      x.t.shape[in.below(3)] = in.chance(128) ? kHuge + 1 : std::numeric_limits<int64_t>::max();
      x.st = nullptr;
      x.t.data = reinterpret_cast<void*>(uintptr_t(0x1000));  // never dereferenced
      return true;
    case kHugeStride:
      if (x.numel() < 2 || !x_used) return false;
      for (int d = 0; d < 3; ++d) {
        if (x.t.shape[d] > 1) {
          x.t.stride[d] = in.chance(128) ? kHuge : std::numeric_limits<int64_t>::max() / 2;
          x.st = nullptr;
          x.t.data = reinterpret_cast<void*>(uintptr_t(0x1000));
          return true;
        }
      }
      return false;
    case kWrapPointer:
      if (x.numel() == 0 || !x_used) return false;
      x.st = nullptr;
      x.t.data = reinterpret_cast<void*>(UINTPTR_MAX - 1);  // + >= 2 bytes wraps
      return true;
    case kNullLseBwd:
      if (!bwd) return false;
      c.lse.t.data = nullptr;
      c.lse.st = nullptr;
      return true;
    case kNullArgs:
      *null_args = true;
      return true;
    case kNullBytes:
      if (c.pb.op < 2) return false;
      *null_bytes = true;
      return true;
  }
  return false;
}

fa_forward_args fwd_args(Call& c) {
  fa_forward_args a{};
  a.q = c.q.t; a.k = c.k.t; a.v = c.v.t; a.out = c.out.t; a.lse = c.lse.t;
  a.options = c.pb.opt;
  return a;
}
fa_backward_args bwd_args(Call& c) {
  fa_backward_args a{};
  a.q = c.q.t; a.k = c.k.t; a.v = c.v.t; a.out = c.out.t; a.dout = c.dout.t; a.lse = c.lse.t;
  a.dq = c.dq.t; a.dk = c.dk.t; a.dv = c.dv.t;
  a.options = c.pb.opt;
  return a;
}

void run_one(Bytes& in) {
  Call c;
  Problem& pb = c.pb;
  pb.op = int(in.below(4));
  const bool bwd = pb.op == 1 || pb.op == 3;
  // Size class: small (run and compared), or big and valid (workspace only,
  // or empty so nothing may be touched).
  const int64_t size_class = in.below(8);
  const bool big = size_class == 7;
  pb.dtype = int32_t(in.below(3));
  pb.B = in.chance(16) ? 0 : 1 + in.below(2);
  pb.Sq = in.chance(16) ? 0 : 1 + in.below(in.chance(200) ? 24 : 80);
  pb.Sk = in.chance(16) ? 0 : 1 + in.below(in.chance(200) ? 24 : 80);
  pb.Hkv = in.chance(8) ? 0 : 1 + in.below(3);
  pb.Hq = pb.Hkv * (1 + in.below(3));
  pb.D = 8 * (1 + in.below(32));
  if (big) {
    // Valid but huge: seqlen up to 2^31 - 1 (the API's limit; numel and span
    // stay within its 2^48 elements: B * H * D <= 2 * 9 * 256 < 2^13).
    const int64_t S = in.chance(200) ? int64_t(1) << (20 + in.below(11)) : INT32_MAX;
    (in.chance(128) ? pb.Sq : pb.Sk) = S;
    if (in.chance(128)) pb.B = 0;  // empty: a real call must not touch anything
  }
  // Keep the fp64 reference cheap.
  while (!big && pb.B * pb.Hq * pb.Sq * pb.Sk * pb.D > (int64_t(1) << 18)) {
    pb.Sq = (pb.Sq + 1) / 2;
    pb.Sk = (pb.Sk + 1) / 2;
  }
  fa_options_init(&pb.opt);
  pb.opt.softmax_scale = fuzz_float(in, false);
  pb.opt.softcap = in.chance(64) ? fuzz_float(in, false) : 0.0f;
  pb.opt.window_left = in.chance(64) ? fuzz_window(in, pb.Sk) : -1;
  pb.opt.window_right = in.chance(64) ? fuzz_window(in, pb.Sq) : -1;
  pb.opt.causal = in.chance(80) ? 1 + in.below(3) : 0;  // any non-zero means true
  pb.opt.deterministic = in.chance(100) ? 1 : 0;
  if (in.chance(32)) pb.opt.stream = reinterpret_cast<void*>(uintptr_t(0xdead0000));  // CPU ignores it
  pb.with_lse = bwd || in.chance(180);
  const float amp = std::array<float, 4>{1.0f, 0.25f, 3.0f, 12.0f}[size_t(in.below(4))];
  const uint32_t seed = in.u32();
  std::mt19937 rng(seed);
  // fp8: a quarter of the bf16 forward calls (and workspace queries), drawn
  // from a generator of its own so that the bytes of the corpus's inputs
  // still decode to the same shapes, options and mutations as before (a
  // quarter of the bf16 forwards among them now run as fp8).
  std::mt19937 pick(seed ^ 0x5bd1e995u);
  int broken_descale = -1;  // fp8: index of a descale made invalid, or -1
  if ((pb.op == 0 || pb.op == 2) && pb.dtype == FA_BF16 && pick() % 4 == 0) {
    pb.fp8 = true;
    pb.scales = pick() % 3 != 0;
    for (float& d : pb.descale) d = pick() % 4 == 0 ? 0.0f : std::array<float, 4>{0.5f, 2.0f, 0.125f, 1.75f}[pick() % 4];
    if (pb.scales && pick() % 8 == 0) broken_descale = int(pick() % 3);
  }
  // v's own head dim (not fp8, which refuses it): from a generator of its
  // own for the same reason; the reference's cost bound then takes the wider.
  std::mt19937 pick_dv(seed ^ 0x9e3779b9u);
  // Head dims that are not a multiple of 8 (zero-padded copies): an eighth of
  // the calls, from a generator of its own as well; v's too when it has its own.
  std::mt19937 pick_odd(seed ^ 0x27d4eb2fu);
  const bool odd = pick_odd() % 8 == 0;
  if (odd) pb.D -= 1 + int64_t(pick_odd() % 7);
  pb.Dv = pb.D;
  if (!pb.fp8 && pick_dv() % 4 == 0) pb.Dv = 8 * (1 + int64_t(pick_dv() % 32));
  if (odd && pb.Dv != pb.D) pb.Dv -= 1 + int64_t(pick_odd() % 7);
  while (!big && pb.B * pb.Hq * pb.Sq * pb.Sk * std::max(pb.D, pb.Dv) > (int64_t(1) << 18)) {
    pb.Sq = (pb.Sq + 1) / 2;
    pb.Sk = (pb.Sk + 1) / 2;
  }
  // Variable-length batches: a quarter of the small forward and backward
  // calls, decided by a generator of their own (as fp8 above); the rest of
  // the input then lays out packed tensors (c_api_fuzz_varlen.cpp).
  std::mt19937 pick_vl(seed ^ 0x85ebca6bu);
  if (!big && pb.op < 2 && pick_vl() % 4 == 0) {
    run_varlen(in, pb, rng, pick_vl, amp);
    return;
  }
  // KV-cache calls: a fifth of the other small 16-bit / fp32 forwards, the
  // same way (c_api_fuzz_kvcache.cpp).
  std::mt19937 pick_kv(seed ^ 0xc2b2ae35u);
  if (!big && pb.op == 0 && !pb.fp8 && pick_kv() % 5 == 0) {
    run_kvcache(in, pb, rng, pick_kv, amp);
    return;
  }

  const int64_t qshape[4] = {pb.B, pb.Sq, pb.Hq, pb.D}, kshape[4] = {pb.B, pb.Sk, pb.Hkv, pb.D};
  const int64_t oshape[4] = {pb.B, pb.Sq, pb.Hq, pb.Dv}, vshape[4] = {pb.B, pb.Sk, pb.Hkv, pb.Dv};
  T* tensors[] = {&c.q, &c.k, &c.v, &c.out, &c.dout, &c.dq, &c.dk, &c.dv};
  for (T* t : tensors) t->t.dtype = pb.dtype;
  if (pb.fp8) {
    for (T* t : {&c.q, &c.k, &c.v}) t->t.dtype = FA_F8E4M3;
  }
  const bool packed = !big && pb.Sq == pb.Sk && pb.Dv == pb.D && in.chance(64);
  if (packed) {  // q, k, v as views into one [B, S, Hq + 2 Hkv, D] buffer
    const int64_t H3 = pb.Hq + 2 * pb.Hkv;
    T whole;
    whole.t.dtype = c.q.t.dtype;
    const int64_t wshape[4] = {pb.B, pb.Sq, H3, pb.D};
    layout(in, whole, wshape);
    allocate(in, whole, true, rng, amp);
    const int64_t h0[3] = {0, pb.Hq, pb.Hq + pb.Hkv};
    T* qkv[3] = {&c.q, &c.k, &c.v};
    for (int i = 0; i < 3; ++i) {
      *qkv[i] = whole;
      qkv[i]->t.shape[2] = i == 0 ? pb.Hq : pb.Hkv;
      qkv[i]->off = whole.off + size_t(h0[i] * whole.t.stride[2]) * esize(whole.t.dtype);
      qkv[i]->t.data = whole.st->bytes.get() + qkv[i]->off;
    }
  } else {
    layout(in, c.q, qshape);
    layout(in, c.k, kshape);
    layout(in, c.v, vshape);
    // Inputs may broadcast: a zero stride is valid for an input.
    for (T* t : {&c.q, &c.k, &c.v})
      if (in.chance(24)) t->t.stride[in.below(3)] = 0;
  }
  layout(in, c.out, oshape);
  if (bwd) {
    layout(in, c.dout, oshape);
    if (in.chance(24)) c.dout.t.stride[in.below(3)] = 0;
    layout(in, c.dq, qshape);
    layout(in, c.dk, kshape);
    layout(in, c.dv, vshape);
  }
  c.lse.t.dtype = FA_F32;
  c.lse.t.ndim = 3;
  c.lse.t.shape[0] = pb.B; c.lse.t.shape[1] = pb.Hq; c.lse.t.shape[2] = pb.Sq;
  c.lse.t.stride[2] = 1; c.lse.t.stride[1] = pb.Sq; c.lse.t.stride[0] = pb.Hq * pb.Sq;

  if (big) {
    // Fake pointers: only workspace queries, or empty tensors, may be given
    // these. 2^51 bytes apart, so the spans (< 2^50 bytes) never overlap.
    uintptr_t fake = 0;
    for (T* t : {&c.q, &c.k, &c.v, &c.out, &c.lse, &c.dout, &c.dq, &c.dk, &c.dv})
      t->t.data = reinterpret_cast<void*>(fake += uintptr_t(1) << 51);
    if (!pb.with_lse) c.lse.t.data = nullptr;
    if (pb.B != 0 && (pb.op == 0 || pb.op == 1)) pb.op += 2;  // not empty: query only
  } else {
    if (!packed) {
      allocate(in, c.q, true, rng, amp);
      allocate(in, c.k, true, rng, amp);
      allocate(in, c.v, true, rng, amp);
    }
    allocate(in, c.out, false, rng, amp);
    if (pb.with_lse) allocate(in, c.lse, false, rng, amp);
    if (bwd) {
      allocate(in, c.dout, true, rng, 1.0f);
      allocate(in, c.dq, false, rng, amp);
      allocate(in, c.dk, false, rng, amp);
      allocate(in, c.dv, false, rng, amp);
    }
  }

  // fp8 descales: fp32 [1] (a broken one is [2], or fp16, or 2-d).
  for (int i = 0; i < 3 && pb.fp8 && pb.scales; ++i) {
    T& d = c.descale[i];
    if (pb.descale[i] == 0.0f && i != broken_descale) continue;
    d.t.dtype = FA_F32;
    d.t.ndim = 1;
    d.t.shape[0] = 1;
    d.t.stride[0] = 1;
    if (i == broken_descale) {
      const uint32_t how = pick() % 3;
      if (how == 0) d.t.shape[0] = 2;
      if (how == 1) d.t.dtype = FA_F16;
      if (how == 2) d.t.ndim = 2, d.t.shape[1] = 1, d.t.stride[1] = 1;
    }
    auto st = std::make_shared<Storage>();
    st->size = 8;
    st->bytes.reset(new uint8_t[st->size]);
    const float val[2] = {pb.descale[i] == 0.0f ? 1.0f : pb.descale[i], 1.0f};
    std::memcpy(st->bytes.get(), val, 8);
    d.st = st;
    d.off = 0;
    d.t.data = st->bytes.get();
  }

  // The backward consumes a forward's out and LSE (a valid forward, run now).
  if (pb.op == 1 && !big) {
    fa_forward_args f = fwd_args(c);
    if (fa_forward(&f) != FA_OK) fail("forward before backward", fa_last_error());
  }

  // Mutations: each makes the call invalid.
  bool null_args = false, null_bytes = false;
  int mutations = 0;
  const int64_t nmut = in.chance(110) ? 1 + in.below(2) : 0;
  std::string applied;
  // Each kind at most once, and one of the dtype kinds: two can undo each
  // other (ndim 5 then ndim - 1 = 4 again; a dtype moved twice round to its
  // own, or lse set to fp16 then moved on to fp32), which made the oracle
  // expect an error from a valid call (crash input in the corpus).
  auto kind_group = [](int m) {
    return m == kDtypeMismatch || m == kLseDtype ? int(kDtypeCode) : m;
  };
  bool used[kMutations] = {};
  for (int64_t i = 0; i < nmut; ++i) {
    const int m = int(in.below(kMutations));
    if (used[kind_group(m)]) continue;
    if (mutate(in, c, m, &null_args, &null_bytes)) {
      used[kind_group(m)] = true;
      ++mutations;
      applied += " " + std::to_string(m);
    }
  }
  // Only fa_forward_fp8 takes the descales: a workspace query (op 2, also
  // what a big forward becomes) ignores a broken one and is valid.
  if (broken_descale >= 0 && pb.op == 0) {
    ++mutations;
    applied += " descale" + std::to_string(broken_descale);
  }
  g_case = "op " + std::to_string(pb.op) + " dtype " + std::to_string(pb.dtype) +
           (pb.fp8 ? " fp8 (scales " + std::to_string(pb.scales) + ": " + std::to_string(pb.descale[0]) +
                         " " + std::to_string(pb.descale[1]) + " " + std::to_string(pb.descale[2]) + ")"
                   : std::string()) + " B " +
           std::to_string(pb.B) + " Sq " + std::to_string(pb.Sq) + " Sk " + std::to_string(pb.Sk) +
           " Hq " + std::to_string(pb.Hq) + " Hkv " + std::to_string(pb.Hkv) + " D " +
           std::to_string(pb.D) + " Dv " + std::to_string(pb.Dv) + " scale " + g_fmt(pb.opt.softmax_scale) + " softcap " +
           g_fmt(pb.opt.softcap) + " window " + std::to_string(pb.opt.window_left) + "," +
           std::to_string(pb.opt.window_right) + " causal " + std::to_string(pb.opt.causal) +
           " amp " + std::to_string(amp) + " packed " + std::to_string(packed) + " mutations" + applied;

  if (std::getenv("FA_FUZZ_DEBUG")) std::fprintf(stderr, "call: %s\n", g_case.c_str());
  Snapshot snap;
  for (T* t : c.all()) snap.add(*t);

  fa_status st = FA_OK;
  size_t ws = 0;
  {
    fa_forward_args f = fwd_args(c);
    fa_backward_args b = bwd_args(c);
    fa_fp8_descale sc{};
    sc.q = c.descale[0].t;
    sc.k = c.descale[1].t;
    sc.v = c.descale[2].t;
    switch (pb.op) {
      case 0:
        st = pb.fp8 ? fa_forward_fp8(null_args ? nullptr : &f, pb.scales ? &sc : nullptr)
                    : fa_forward(null_args ? nullptr : &f);
        break;
      case 1: st = fa_backward(null_args ? nullptr : &b); break;
      case 2: st = fa_forward_workspace_bytes(null_args ? nullptr : &f, null_bytes ? nullptr : &ws); break;
      default: st = fa_backward_workspace_bytes(null_args ? nullptr : &b, null_bytes ? nullptr : &ws); break;
    }
  }
  if (!expect_status(st, mutations, snap)) return;
  if (pb.op >= 2 || big) return;

  // Inputs intact (out and lse are inputs of the backward).
  std::vector<const T*> ins = {&c.q, &c.k, &c.v, &c.descale[0], &c.descale[1], &c.descale[2]};
  if (bwd) ins.insert(ins.end(), {&c.out, &c.lse, &c.dout});
  expect_inputs_intact(snap, ins);
  expect_outputs_written(bwd, pb.with_lse, c.out, c.lse, c.dq, c.dk, c.dv);

  judge(pb, read_call(pb, bwd, c.q, c.k, c.v, c.out, c.lse, c.dout, c.dq, c.dk, c.dv));
}

void judge(const Problem& pb, const Dense& d) {
  const bool bwd = pb.op == 1;
  const std::vector<double>&q = d.q, &k = d.k, &v = d.v;
  // Bound on |logit| before the softcap's tanh (what fp32 must hold):
  // scale [/ cap] * max ||q_i|| * max ||k_j||.
  const auto rp = ref_problem(pb);
  const double scale = pb.opt.softmax_scale > 0 ? pb.opt.softmax_scale : 1.0 / std::sqrt(double(pb.D));
  auto max_norm = [&](const std::vector<double>& x) {
    double m = 0;
    for (size_t r = 0; r + size_t(pb.D) <= x.size(); r += size_t(pb.D)) {
      double n = 0;
      for (int64_t d = 0; d < pb.D; ++d) n += x[r + size_t(d)] * x[r + size_t(d)];
      m = std::max(m, std::sqrt(n));
    }
    return m;
  };
  const double logit = scale / (pb.opt.softcap > 0 ? double(pb.opt.softcap) : 1.0) * max_norm(q) * max_norm(k);
  if (pb.Hkv == 0) return;  // no heads (valid and empty); the reference divides by heads_kv
  // fp8: the fp8 yardstick (P rounded to e4m3, O to bf16; naive_same_dtype.hpp).
  const auto dt = pb.fp8 ? flashattn::DType::F8E4M3 : static_cast<flashattn::DType>(pb.dtype);
  const double dt_max = pb.dtype == FA_F16 ? 65504.0 : 3.0e38;
  // While fp32 holds the logits: never a NaN, and no infinity where the exact
  // value fits the dtype with 2x headroom (no overflow inside the kernel).
  // Exception: fp16 with large logits, where fp32 rounding of the logits
  // (~eps * logit in P) legitimately moves a gradient past 65504.
  auto expect_finite = [&](const char* what, const std::vector<double>& out,
                           const std::vector<double>& ref) {
    if (logit >= 1e30) return;
    const bool inf_ok = pb.dtype == FA_F16 && logit > 64;
    for (size_t i = 0; i < out.size(); ++i) {
      if (std::isfinite(ref[i]) && std::fabs(ref[i]) <= dt_max / 2 &&
          (std::isnan(out[i]) || (std::isinf(out[i]) && !inf_ok)))
        fail(what, "non-finite " + std::to_string(out[i]) + " at " + std::to_string(i) + " (reference " + std::to_string(ref[i]) +
                       ", logits bounded by " + std::to_string(logit) + ")");
    }
  };
  // The rule is calibrated for moderate logits (fp32 rounding of a logit of
  // size X moves P by ~eps * X); beyond that only finiteness is checked. Nor
  // does it hold for a scale [/ cap] so small that the kernels' scaled Q
  // (they fold the scale into Q) falls into fp32's subnormals.
  const double qscale = scale / (pb.opt.softcap > 0 ? double(pb.opt.softcap) : 1.0);
  // The rule's head dim: the longer of the two dot products (as the tests'
  // Case::rule_dim).
  const int64_t rule_dim = std::max(pb.D, pb.Dv);
  const bool compare = logit <= 64 && qscale >= 1e-20;
  if (std::getenv("FA_FUZZ_DEBUG")) {
    auto mx = [](const std::vector<double>& x) { double m = 0; for (double e : x) m = std::max(m, std::fabs(e)); return m; };
    std::fprintf(stderr, "max|q| %g max|k| %g max|v| %g logit %g fp8 %d\n", mx(q), mx(k), mx(v), logit,
                 int(pb.fp8));
  }
  if (!bwd) {
    std::vector<double> ref(size_t(pb.B * pb.Sq * pb.Hq * pb.Dv)), lse(size_t(pb.B * pb.Hq * pb.Sq)), nout, nlse;
    flashattn::reference::forward(rp, q.data(), k.data(), v.data(), ref.data(), lse.data());
    const std::vector<double>& out = d.out;
    expect_finite("out", out, ref);
    if (pb.with_lse) expect_finite("lse", d.lse, lse);
    if (!compare) return;
    flashattn::reference::naive_forward(rp, dt, q, k, v, &nout, &nlse);
    const auto m = flashattn::reference::magnitudes(q, k, v, {}, pb.D, scale, pb.Dv);
    expect_rule("out", pb.fp8 ? FA_BF16 : pb.dtype, out, ref, nout, pb.Sk, rule_dim, m.out);
    if (pb.with_lse) {
      const double score_err =
          pb.fp8 ? flashattn::reference::fp8_score_error(q, k, pb.B, pb.Sq, pb.Sk, pb.Hq, pb.Hkv, pb.D, scale)
                 : 0.0;
      const auto s = flashattn::reference::judge_lse(d.lse, lse, nlse, pb.D, score_err);
      if (!s.pass()) fail("lse", "max_err " + std::to_string(s.max_err) + " bad " + std::to_string(s.bad));
    }
    return;
  }
  const std::vector<double>& dO = d.dout;
  std::vector<double> dq(q.size()), dk(k.size()), dv(v.size()), ndq, ndk, ndv;
  // Both the reference and the naive take D = rowsum(dO o O) from the O this
  // backward was given (the library's forward, run above), so that all three
  // carry the same error from O's rounding (reference.hpp says why).
  const std::vector<double>& given_out = d.out;
  flashattn::reference::backward(rp, q.data(), k.data(), v.data(), dO.data(), dq.data(), dk.data(),
                                 dv.data(), given_out.data());
  const std::vector<double>&gq = d.dq, &gk = d.dk, &gv = d.dv;
  expect_finite("dq", gq, dq);
  expect_finite("dk", gk, dk);
  expect_finite("dv", gv, dv);
  if (!compare) return;
  flashattn::reference::naive_backward(rp, dt, q, k, v, dO, &ndq, &ndk, &ndv, &given_out);
  const auto m = flashattn::reference::magnitudes(q, k, v, dO, pb.D, scale, pb.Dv);
  const int64_t group = pb.Hq / pb.Hkv;
  const int64_t col = std::max(pb.Sk, pb.Sq * group);
  expect_rule("dq", pb.dtype, gq, dq, ndq, pb.Sk, rule_dim, m.dq);
  expect_rule("dk", pb.dtype, gk, dk, ndk, col, rule_dim, m.dk);
  expect_rule("dv", pb.dtype, gv, dv, ndv, col, rule_dim, m.dv);
}

}  // namespace fa_fuzz

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  fa_fuzz::Bytes in{data, size};
  fa_fuzz::run_one(in);
  return 0;
}
