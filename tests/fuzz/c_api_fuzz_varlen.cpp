// Variable-length batches through the C ABI (fa_forward_varlen,
// fa_forward_varlen_fp8, fa_backward_varlen): packed [total, heads, head_dim]
// tensors in fuzzed layouts, cu_seqlens with zero-length sequences, max
// lengths at or above the longest sequence, and then zero or more mutations
// that break one of the API's varlen rules (cu_seqlens' values, dtype, shape,
// device, the max lengths, the tensors' rank, ...). The oracle is the padded
// calls' (c_api_fuzz.cpp): a mutated call is refused with a message and no
// byte changed; a valid one writes every output element and nothing else, and
// each sequence's rows match the fp64 reference of that sequence alone.
#include "fuzz/fuzz_harness.hpp"

namespace fa_fuzz {
namespace {

// Strides for a [total, H, D] tensor: tokens and heads in a fuzzed order,
// each with optional padding; head dim contiguous. Never self-overlapping.
void layout3(Bytes& in, T& x, const int64_t shape[3]) {
  x.t.ndim = 3;
  for (int i = 0; i < 3; ++i) x.t.shape[i] = shape[i];
  const bool heads_outer = in.chance(64);
  const int order[2] = {heads_outer ? 0 : 1, heads_outer ? 1 : 0};  // inner -> outer
  x.t.stride[2] = 1;
  int64_t inner = shape[2] + (in.chance(64) ? 8 * in.below(3) + in.below(2) : 0);
  for (int d : order) {
    x.t.stride[d] = inner;
    inner = inner * std::max<int64_t>(shape[d], 1) + (in.chance(48) ? in.below(24) : 0);
  }
}

// An int32 [n] tensor holding `values` (cu_seqlens).
T index_tensor(const std::vector<int32_t>& values) {
  T x;
  x.t.dtype = FA_I32;
  x.t.ndim = 1;
  x.t.shape[0] = int64_t(values.size());
  x.t.stride[0] = 1;
  auto st = std::make_shared<Storage>();
  st->size = values.size() * sizeof(int32_t);
  st->bytes.reset(new uint8_t[st->size]);
  std::memcpy(st->bytes.get(), values.data(), st->size);
  x.st = st;
  x.t.data = st->bytes.get();
  return x;
}

int32_t* values(T& cu) { return reinterpret_cast<int32_t*>(cu.st->bytes.get()); }

enum VarlenMutation {
  vCuStart, vCuOrder, vCuPastTotal, vMaxBelow, vMaxNegative, vCuDtype, vCuNdim, vCuLength,
  vCuNull, vCuStride, vCuDevice, vRank, vLseShape, vHeadsKv, vHeadDim, vDtypeMismatch,
  vNullData, vOverlapIn, vScale, vWindow, vNullArgs, vNullVarlen, vDescale, vNullLseBwd,
  vOutRows, vMutations
};

struct VarlenCall {
  Problem pb;  // B sequences; Sq / Sk are the per-sequence length bounds
  std::vector<int32_t> cu_q, cu_k;
  int64_t total_q = 0, total_k = 0;
  T q, k, v, out, lse, dout, dq, dk, dv, cuq, cuk;
  T descale[3];
  fa_varlen vl{};
  std::vector<T*> all() {
    return {&q, &k, &v, &out, &lse, &dout, &dq, &dk, &dv, &cuq, &cuk, &descale[0], &descale[1], &descale[2]};
  }
};

// Applies mutation m if it can apply to this call; returns whether it did.
bool mutate(Bytes& in, VarlenCall& c, int m, bool* null_args, bool* null_varlen) {
  const bool bwd = c.pb.op == 1;
  T& cu = in.chance(128) ? c.cuq : c.cuk;
  const int64_t B = c.pb.B;
  // The value mutations need cu's storage (a null-data mutation may have
  // dropped it).
  if ((m == vCuStart || m == vCuOrder || m == vCuPastTotal) && !cu.st) return false;
  switch (m) {
    case vCuStart:
      values(cu)[0] = 1 + int32_t(in.below(3));
      return true;
    case vCuOrder: {
      if (B < 1) return false;
      const int64_t b = 1 + in.below(B);
      values(cu)[b] = values(cu)[b - 1] - 1 - int32_t(in.below(3));
      return true;
    }
    case vCuPastTotal:
      if (B < 1) return false;
      values(cu)[B] = int32_t((&cu == &c.cuq ? c.total_q : c.total_k) + 1 + in.below(3));
      return true;
    case vMaxBelow: {
      const bool on_q = &cu == &c.cuq;
      const std::vector<int32_t>& v = on_q ? c.cu_q : c.cu_k;
      int64_t longest = 0;
      for (size_t b = 1; b < v.size(); ++b) longest = std::max<int64_t>(longest, v[b] - v[b - 1]);
      if (longest == 0) return false;
      (on_q ? c.vl.max_seqlen_q : c.vl.max_seqlen_k) = in.below(longest);
      return true;
    }
    case vMaxNegative:
      (in.chance(128) ? c.vl.max_seqlen_q : c.vl.max_seqlen_k) = -1 - in.below(5);
      return true;
    case vCuDtype:
      cu.t.dtype = std::array<int32_t, 4>{FA_F32, FA_F16, FA_F8E4M3, 7}[size_t(in.below(4))];
      return true;
    case vCuNdim:
      cu.t.ndim = 2;
      cu.t.shape[1] = 1;
      cu.t.stride[1] = 1;
      return true;
    case vCuLength:  // one entry fewer than the other (never read past)
      c.cuk.t.shape[0] -= 1;
      return true;
    case vCuNull:
      cu.t.data = nullptr;
      cu.st = nullptr;
      return true;
    case vCuStride:
      if (cu.t.shape[0] < 2) return false;
      cu.t.stride[0] = 2;
      return true;
    case vCuDevice:  // q is on the CPU
      cu.t.device = FA_CUDA;
      return true;
    case vRank: {  // a padded-rank (or 2-d) tensor in a varlen call
      T* pick[] = {&c.q, &c.k, &c.v, bwd ? &c.dq : &c.out};
      T& x = *pick[in.below(4)];
      if (in.chance(128)) {
        x.t.ndim = 4;
        x.t.shape[3] = 1;
        x.t.stride[3] = 1;
      } else {
        x.t.ndim = 2;
      }
      return true;
    }
    case vLseShape:
      if (!c.lse.t.data) return false;
      if (in.chance(128)) {
        c.lse.t.shape[in.below(2)] += 1;
      } else {
        c.lse.t.ndim = 3;
        c.lse.t.shape[2] = 1;
        c.lse.t.stride[2] = 1;
      }
      return true;
    case vHeadsKv:
      if (c.pb.Hq == 0) return false;
      c.k.t.shape[1] = c.v.t.shape[1] = c.pb.Hq + 1;
      return true;
    case vHeadDim:
      c.q.t.shape[2] = c.pb.D + 1 + in.below(7);
      return true;
    case vDtypeMismatch:
      c.k.t.dtype = c.k.t.dtype == FA_F32 ? FA_F16 : FA_F32;
      return true;
    case vNullData: {
      T* pick[] = {&c.q, &c.k, &c.v, bwd ? &c.dk : &c.out};
      T& x = *pick[in.below(4)];
      if (x.numel() == 0) return false;
      x.t.data = nullptr;
      x.st = nullptr;
      return true;
    }
    case vOverlapIn: {  // an output starting inside an input
      T& o = bwd ? (in.chance(128) ? c.dq : c.dv) : c.out;
      T& i = in.chance(128) ? c.q : c.v;
      if (o.numel() == 0 || i.numel() == 0 || !i.st) return false;
      o.st = i.st;
      o.off = i.off;
      o.t.data = i.t.data;
      return true;
    }
    case vScale:
      c.pb.opt.softmax_scale = std::numeric_limits<float>::quiet_NaN();
      return true;
    case vWindow:
      (in.chance(128) ? c.pb.opt.window_left : c.pb.opt.window_right) = -2 - int64_t(in.u8());
      return true;
    case vNullArgs:
      *null_args = true;
      return true;
    case vNullVarlen:
      *null_varlen = true;
      return true;
    case vDescale: {  // fp8: a descale of shape [2]
      if (!c.pb.fp8 || !c.pb.scales) return false;
      T& d = c.descale[in.below(3)];
      if (!d.st) return false;
      d.t.shape[0] = 2;  // its storage holds two floats
      return true;
    }
    case vNullLseBwd:
      if (!bwd) return false;
      c.lse.t.data = nullptr;
      c.lse.st = nullptr;
      return true;
    case vOutRows: {
      T& o = bwd ? c.dk : c.out;
      o.t.shape[0] += 1;
      return true;
    }
  }
  return false;
}

// Rows [r0, r1) of a dense [total, H, D] array.
std::vector<double> rows(const std::vector<double>& x, int64_t r0, int64_t r1, int64_t width) {
  return std::vector<double>(x.begin() + r0 * width, x.begin() + r1 * width);
}

}  // namespace

void run_varlen(Bytes& in, const Problem& padded, std::mt19937& rng, std::mt19937& pick, float amp) {
  VarlenCall c;
  Problem& pb = c.pb;
  pb = padded;
  const bool bwd = pb.op == 1;
  // Up to 4 sequences, each as long as the padded draw's lengths at most
  // (the reference's cost bound holds per sequence), a quarter of them empty.
  if (pb.B > 0) pb.B = 1 + int64_t(pick() % 4);
  c.cu_q.assign(1, 0);
  c.cu_k.assign(1, 0);
  int64_t longest_q = 0, longest_k = 0;
  for (int64_t b = 0; b < pb.B; ++b) {
    const int64_t lq = pick() % 4 == 0 ? 0 : int64_t(pick() % uint32_t(pb.Sq + 1));
    const int64_t lk = pick() % 4 == 0 ? 0 : int64_t(pick() % uint32_t(pb.Sk + 1));
    c.cu_q.push_back(int32_t(c.cu_q.back() + lq));
    c.cu_k.push_back(int32_t(c.cu_k.back() + lk));
    longest_q = std::max(longest_q, lq);
    longest_k = std::max(longest_k, lk);
  }
  c.vl.max_seqlen_q = longest_q + (pick() % 4 == 0 ? int64_t(pick() % 3) : 0);
  c.vl.max_seqlen_k = longest_k + (pick() % 4 == 0 ? int64_t(pick() % 3) : 0);
  // A quarter of the calls pack into tensors longer than their sequences
  // (rows past cu_seqlens[batch]: common/varlen_tail.hpp).
  const bool tail = pick() % 4 == 0;
  c.total_q = c.cu_q.back() + (tail ? int64_t(pick() % 4) : 0);
  c.total_k = c.cu_k.back() + (tail ? int64_t(pick() % 4) : 0);

  const int64_t qshape[3] = {c.total_q, pb.Hq, pb.D}, kshape[3] = {c.total_k, pb.Hkv, pb.D};
  const int64_t oshape[3] = {c.total_q, pb.Hq, pb.Dv}, vshape[3] = {c.total_k, pb.Hkv, pb.Dv};
  for (T* t : {&c.q, &c.k, &c.v, &c.out, &c.dout, &c.dq, &c.dk, &c.dv}) t->t.dtype = pb.dtype;
  if (pb.fp8) {
    for (T* t : {&c.q, &c.k, &c.v}) t->t.dtype = FA_F8E4M3;
  }
  layout3(in, c.q, qshape);
  layout3(in, c.k, kshape);
  layout3(in, c.v, vshape);
  layout3(in, c.out, oshape);
  if (bwd) {
    layout3(in, c.dout, oshape);
    layout3(in, c.dq, qshape);
    layout3(in, c.dk, kshape);
    layout3(in, c.dv, vshape);
  }
  c.lse.t.dtype = FA_F32;
  c.lse.t.ndim = 2;
  c.lse.t.shape[0] = pb.Hq;
  c.lse.t.shape[1] = c.total_q;
  c.lse.t.stride[1] = 1;
  c.lse.t.stride[0] = c.total_q;
  for (T* t : {&c.q, &c.k, &c.v}) allocate(in, *t, true, rng, amp);
  allocate(in, c.out, false, rng, amp);
  if (pb.with_lse) allocate(in, c.lse, false, rng, amp);
  if (bwd) {
    allocate(in, c.dout, true, rng, 1.0f);
    for (T* t : {&c.dq, &c.dk, &c.dv}) allocate(in, *t, false, rng, amp);
  }
  c.cuq = index_tensor(c.cu_q);
  c.cuk = index_tensor(c.cu_k);
  // fp8 descales: fp32 [1] each (storage for two, for the [2] mutation).
  for (int i = 0; i < 3 && pb.fp8 && pb.scales; ++i) {
    if (pb.descale[i] == 0.0f) continue;
    T& d = c.descale[i];
    d.t.dtype = FA_F32;
    d.t.ndim = 1;
    d.t.shape[0] = 1;
    d.t.stride[0] = 1;
    auto st = std::make_shared<Storage>();
    st->size = 8;
    st->bytes.reset(new uint8_t[st->size]);
    const float val[2] = {pb.descale[i], 1.0f};
    std::memcpy(st->bytes.get(), val, 8);
    d.st = st;
    d.t.data = st->bytes.get();
  }
  auto set_cu = [&] {
    c.vl.cu_seqlens_q = c.cuq.t;
    c.vl.cu_seqlens_k = c.cuk.t;
  };
  auto fwd_args = [&] {
    fa_forward_args a{};
    a.q = c.q.t; a.k = c.k.t; a.v = c.v.t; a.out = c.out.t; a.lse = c.lse.t;
    a.options = pb.opt;
    return a;
  };

  // The backward consumes a forward's out and LSE (a valid forward, run now).
  if (bwd) {
    set_cu();
    const fa_forward_args f = fwd_args();
    if (fa_forward_varlen(&f, &c.vl) != FA_OK) fail("varlen forward before backward", fa_last_error());
  }

  bool null_args = false, null_varlen = false;
  int mutations = 0;
  const int64_t nmut = in.chance(110) ? 1 + in.below(2) : 0;
  std::string applied;
  bool used[vMutations] = {};
  for (int64_t i = 0; i < nmut; ++i) {
    const int m = int(in.below(vMutations));
    if (used[m]) continue;
    if (mutate(in, c, m, &null_args, &null_varlen)) {
      used[m] = true;
      ++mutations;
      applied += " " + std::to_string(m);
    }
  }
  set_cu();
  auto list = [](const std::vector<int32_t>& v) {
    std::string s;
    for (int32_t x : v) s += " " + std::to_string(x);
    return s;
  };
  g_case = std::string("varlen op ") + std::to_string(pb.op) + " dtype " + std::to_string(pb.dtype) +
           (pb.fp8 ? " fp8 (scales " + std::to_string(pb.scales) + ")" : std::string()) + " cu_q" +
           list(c.cu_q) + " cu_k" + list(c.cu_k) + " rows " + std::to_string(c.total_q) + "," + std::to_string(c.total_k) + " max " + std::to_string(c.vl.max_seqlen_q) + "," +
           std::to_string(c.vl.max_seqlen_k) + " Hq " + std::to_string(pb.Hq) + " Hkv " +
           std::to_string(pb.Hkv) + " D " + std::to_string(pb.D) + " Dv " + std::to_string(pb.Dv) +
           " scale " + g_fmt(pb.opt.softmax_scale) + " softcap " + g_fmt(pb.opt.softcap) + " window " +
           std::to_string(pb.opt.window_left) + "," + std::to_string(pb.opt.window_right) + " causal " +
           std::to_string(pb.opt.causal) + " amp " + std::to_string(amp) + " mutations" + applied;
  if (std::getenv("FA_FUZZ_DEBUG")) std::fprintf(stderr, "call: %s\n", g_case.c_str());
  Snapshot snap;
  for (T* t : c.all()) snap.add(*t);

  fa_status st = FA_OK;
  {
    const fa_forward_args f = fwd_args();
    fa_backward_args b{};
    b.q = c.q.t; b.k = c.k.t; b.v = c.v.t; b.out = c.out.t; b.dout = c.dout.t; b.lse = c.lse.t;
    b.dq = c.dq.t; b.dk = c.dk.t; b.dv = c.dv.t;
    b.options = pb.opt;
    fa_fp8_descale sc{};
    sc.q = c.descale[0].t;
    sc.k = c.descale[1].t;
    sc.v = c.descale[2].t;
    const fa_varlen* vl = null_varlen ? nullptr : &c.vl;
    if (bwd) {
      st = fa_backward_varlen(null_args ? nullptr : &b, vl);
    } else if (pb.fp8) {
      st = fa_forward_varlen_fp8(null_args ? nullptr : &f, vl, pb.scales ? &sc : nullptr);
    } else {
      st = fa_forward_varlen(null_args ? nullptr : &f, vl);
    }
  }
  if (!expect_status(st, mutations, snap)) return;
  std::vector<const T*> ins = {&c.q, &c.k, &c.v, &c.cuq, &c.cuk, &c.descale[0], &c.descale[1], &c.descale[2]};
  if (bwd) ins.insert(ins.end(), {&c.out, &c.lse, &c.dout});
  expect_inputs_intact(snap, ins);
  expect_outputs_written(bwd, pb.with_lse, c.out, c.lse, c.dq, c.dk, c.dv);

  // Each sequence against the reference of that sequence alone.
  // lse: [Hq, total_q].
  const Dense all = read_call(pb, bwd, c.q, c.k, c.v, c.out, c.lse, c.dout, c.dq, c.dk, c.dv);
  const int64_t wq = pb.Hq * pb.D, wk = pb.Hkv * pb.D, wo = pb.Hq * pb.Dv, wv = pb.Hkv * pb.Dv;
  for (int64_t b = 0; b < pb.B; ++b) {
    const int64_t q0 = c.cu_q[size_t(b)], q1 = c.cu_q[size_t(b) + 1];
    const int64_t k0 = c.cu_k[size_t(b)], k1 = c.cu_k[size_t(b) + 1];
    Problem one = pb;
    one.B = 1;
    one.Sq = q1 - q0;
    one.Sk = k1 - k0;
    Dense d;
    d.q = rows(all.q, q0, q1, wq);
    d.k = rows(all.k, k0, k1, wk);
    d.v = rows(all.v, k0, k1, wv);
    d.out = rows(all.out, q0, q1, wo);
    for (int64_t h = 0; h < pb.Hq && pb.with_lse; ++h)
      for (int64_t i = q0; i < q1; ++i) d.lse.push_back(all.lse[size_t(h * c.total_q + i)]);
    if (bwd) {
      d.dout = rows(all.dout, q0, q1, wo);
      d.dq = rows(all.dq, q0, q1, wq);
      d.dk = rows(all.dk, k0, k1, wk);
      d.dv = rows(all.dv, k0, k1, wv);
    }
    g_case += b == 0 ? " | sequence 0" : " " + std::to_string(b);
    judge(one, d);
  }
  // Rows past the last sequence: rows that see no key (O 0, LSE -inf, gradients 0).
  const int64_t end_q = c.cu_q.back(), end_k = c.cu_k.back();
  g_case += " | rows past the last sequence (" + std::to_string(c.total_q - end_q) + " q, " +
            std::to_string(c.total_k - end_k) + " k)";
  auto zero_from = [](const char* what, const std::vector<double>& x, int64_t r0, int64_t width) {
    for (size_t i = size_t(r0 * width); i < x.size(); ++i)
      if (x[i] != 0.0)
        fail(what, "past the last sequence: element " + std::to_string(i) + " is " + g_fmt(x[i]));
  };
  if (bwd) {
    zero_from("dq", all.dq, end_q, wq);
    zero_from("dk", all.dk, end_k, wk);
    zero_from("dv", all.dv, end_k, wv);
    return;
  }
  zero_from("out", all.out, end_q, wo);
  for (int64_t h = 0; h < pb.Hq && pb.with_lse; ++h)
    for (int64_t i = end_q; i < c.total_q; ++i) {
      const double l = all.lse[size_t(h * c.total_q + i)];
      if (!(std::isinf(l) && l < 0))
        fail("lse", "past the last sequence: head " + std::to_string(h) + " row " + std::to_string(i) + " is " + g_fmt(l));
    }
}

}  // namespace fa_fuzz
