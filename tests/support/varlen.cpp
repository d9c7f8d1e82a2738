#include "support/varlen.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>
#include <random>
#include <sstream>

#include "reference/naive_same_dtype.hpp"
#include "reference/reference.hpp"
#include "support/check.hpp"
#include "support/half.hpp"
#include "support/harness.hpp"
#include "support/rng.hpp"

namespace fa_test {

namespace ref = flashattn::reference;

Tensor make_i32(Device dev, const std::vector<int32_t>& values, std::vector<int64_t> shape) {
  Tensor t = make_contiguous(dev, DType::I32, std::move(shape));
  std::vector<double> d(values.begin(), values.end());
  t.write(d);
  return t;
}

std::vector<int32_t> cumulative(const std::vector<int64_t>& lens) {
  std::vector<int32_t> cu{0};
  for (int64_t l : lens) cu.push_back(static_cast<int32_t>(cu.back() + l));
  return cu;
}

namespace {

std::string lens_str(const std::vector<int64_t>& l) {
  std::ostringstream s;
  for (size_t i = 0; i < l.size(); ++i) s << (i ? "_" : "") << l[i];
  return s.str();
}

// Rows [r0, r0 + n) of a dense [rows, heads, d] array.
std::vector<double> rows(const std::vector<double>& x, int64_t r0, int64_t n, int64_t hd) {
  return std::vector<double>(x.begin() + r0 * hd, x.begin() + (r0 + n) * hd);
}

void put_rows(std::vector<double>* x, const std::vector<double>& part, int64_t r0, int64_t hd) {
  std::copy(part.begin(), part.end(), x->begin() + r0 * hd);
}

// The reference, the naive and (for the backward) their gradients, one
// sequence at a time.
struct SeqProblem {
  ref::Problem pb;
  std::vector<double> q, k, v, dout;
};

struct Results {
  std::vector<double> out, lse, naive_out, naive_lse;
};

// Runs reference + naive on one sequence; LSE comes back [Hq, len_q].
void run_forward(const SeqProblem& s, DType dt, Results* r) {
  r->out.assign(static_cast<size_t>(s.pb.seqlen_q * s.pb.heads_q * s.pb.dim_v()), 0.0);
  r->lse.assign(static_cast<size_t>(s.pb.heads_q * s.pb.seqlen_q), 0.0);
  ref::forward(s.pb, s.q.data(), s.k.data(), s.v.data(), r->out.data(), r->lse.data());
  ref::naive_forward(s.pb, dt, s.q, s.k, s.v, &r->naive_out, &r->naive_lse);
}

ref::Problem problem_of(const VarlenCase& c, int64_t lq, int64_t lk) {
  ref::Problem pb;
  pb.batch = 1;
  pb.seqlen_q = lq;
  pb.seqlen_k = lk;
  pb.heads_q = c.heads_q;
  pb.heads_kv = c.heads_kv;
  pb.head_dim = c.head_dim;
  pb.head_dim_v = c.head_dim_v;
  pb.causal = c.causal;
  pb.window_left = c.window_left;
  pb.window_right = c.window_right;
  pb.softcap = c.softcap;
  return pb;
}

int64_t max_of(const std::vector<int64_t>& v) {
  return v.empty() ? 0 : *std::max_element(v.begin(), v.end());
}

}  // namespace

std::string VarlenCase::name() const {
  std::ostringstream s;
  s << dtype_tag(dtype) << "_q" << lens_str(lens_q) << "_k" << lens_str(lens_k) << "_h" << heads_q << "x"
    << heads_kv << "_d" << head_dim;
  if (head_dim_v > 0) s << "_dv" << head_dim_v;
  if (causal) s << "_causal";
  if (window_left >= 0 || window_right >= 0) s << "_win" << window_left << "_" << window_right;
  if (softcap > 0) s << "_cap";
  if (deterministic) s << "_det";
  if (tail_q || tail_k) s << "_tail" << tail_q << "_" << tail_k;
  std::string r = s.str();
  std::replace(r.begin(), r.end(), '-', 'm');
  return r;
}
void PrintTo(const VarlenCase& c, std::ostream* os) { *os << c.name(); }

VarlenInstance make_varlen(Device dev, const VarlenCase& c, bool backward) {
  VarlenInstance in;
  in.c = c;
  const int64_t tq = std::accumulate(c.lens_q.begin(), c.lens_q.end(), c.tail_q);
  const int64_t tk = std::accumulate(c.lens_k.begin(), c.lens_k.end(), c.tail_k);
  const int64_t B = static_cast<int64_t>(c.lens_q.size());
  in.q = make_contiguous(dev, c.dtype, {tq, c.heads_q, c.head_dim});
  in.k = make_contiguous(dev, c.dtype, {tk, c.heads_kv, c.head_dim});
  in.v = make_contiguous(dev, c.dtype, {tk, c.heads_kv, c.dim_v()});
  in.qd = fill_randn(in.q);
  in.kd = fill_randn(in.k);
  in.vd = fill_randn(in.v);
  in.out = make_contiguous(dev, c.dtype, {tq, c.heads_q, c.dim_v()});
  in.lse = make_contiguous(dev, DType::F32, {c.heads_q, tq});
  in.cu_q = make_i32(dev, cumulative(c.lens_q), {B + 1});
  in.cu_k = make_i32(dev, cumulative(c.lens_k), {B + 1});
  if (backward) {
    in.dout = make_contiguous(dev, c.dtype, {tq, c.heads_q, c.dim_v()});
    in.dod = fill_randn(in.dout);
    in.dq = make_contiguous(dev, c.dtype, {tq, c.heads_q, c.head_dim});
    in.dk = make_contiguous(dev, c.dtype, {tk, c.heads_kv, c.head_dim});
    in.dv = make_contiguous(dev, c.dtype, {tk, c.heads_kv, c.dim_v()});
  }
  return in;
}

namespace {
flashattn::Options options_of(const VarlenCase& c) {
  flashattn::Options o;
  o.causal = c.causal;
  o.window_left = c.window_left;
  o.window_right = c.window_right;
  o.softcap = c.softcap;
  o.deterministic = c.deterministic;
  return o;
}
flashattn::Varlen varlen_of(const VarlenInstance& in) {
  flashattn::Varlen v;
  v.cu_seqlens_q = in.cu_q.view();
  v.cu_seqlens_k = in.cu_k.view();
  v.max_seqlen_q = max_of(in.c.lens_q);
  v.max_seqlen_k = max_of(in.c.lens_k);
  return v;
}
}  // namespace

flashattn::ForwardArgs VarlenInstance::fwd_args() const {
  flashattn::ForwardArgs a;
  a.q = q.view();
  a.k = k.view();
  a.v = v.view();
  a.out = out.view();
  a.lse = lse.view();
  a.options = options_of(c);
  a.varlen = varlen_of(*this);
  return a;
}

flashattn::BackwardArgs VarlenInstance::bwd_args() const {
  flashattn::BackwardArgs a;
  a.q = q.view();
  a.k = k.view();
  a.v = v.view();
  a.out = out.view();
  a.dout = dout.view();
  a.lse = lse.view();
  a.dq = dq.view();
  a.dk = dk.view();
  a.dv = dv.view();
  a.options = options_of(c);
  a.varlen = varlen_of(*this);
  return a;
}

void check_varlen_forward(Device dev, const VarlenCase& c) {
  if (!device_usable(dev)) GTEST_SKIP() << "no usable " << device_name(dev) << " device";
  VarlenInstance in = make_varlen(dev, c, false);
  CallGuard guard({&in.q, &in.k, &in.v, &in.cu_q, &in.cu_k}, {&in.out, &in.lse});
  const flashattn::Status st = flashattn::forward(in.fwd_args());
  if (skip_if_unsupported(dev, st)) GTEST_SKIP() << "Unsupported: " << st.message;
  ASSERT_TRUE(st.ok()) << "forward failed: " << st.message;
  EXPECT_TRUE(guard.wrote_exactly_outputs());

  const int64_t hdq = c.heads_q * c.head_dim, hdk = c.heads_kv * c.head_dim;
  const int64_t hdo = c.heads_q * c.dim_v(), hdv = c.heads_kv * c.dim_v();
  const int64_t tq = static_cast<int64_t>(in.qd.size()) / hdq;
  Results all;
  all.out.assign(size_t(tq * hdo), 0.0);
  all.naive_out = all.out;
  // Rows past the last sequence see no key: O = 0 (above), LSE = -inf.
  all.lse.assign(static_cast<size_t>(c.heads_q * tq), -std::numeric_limits<double>::infinity());
  all.naive_lse = all.lse;
  int64_t oq = 0, ok = 0;
  for (size_t b = 0; b < c.lens_q.size(); ++b) {
    const int64_t lq = c.lens_q[b], lk = c.lens_k[b];
    SeqProblem s{problem_of(c, lq, lk), rows(in.qd, oq, lq, hdq), rows(in.kd, ok, lk, hdk),
                 rows(in.vd, ok, lk, hdv), {}};
    if (lq > 0) {
      Results r;
      run_forward(s, c.dtype, &r);
      put_rows(&all.out, r.out, oq, hdo);
      put_rows(&all.naive_out, r.naive_out, oq, hdo);
      for (int64_t h = 0; h < c.heads_q; ++h)
        for (int64_t i = 0; i < lq; ++i) {
          all.lse[h * tq + oq + i] = r.lse[h * lq + i];
          all.naive_lse[h * tq + oq + i] = r.naive_lse[h * lq + i];
        }
    }
    oq += lq;
    ok += lk;
  }
  const double scale = 1.0 / std::sqrt(static_cast<double>(c.head_dim));
  const auto m = ref::magnitudes(in.qd, in.kd, in.vd, {}, c.head_dim, scale, c.dim_v());
  EXPECT_TRUE(within_rule("out", c.dtype, in.out.read(), all.out, all.naive_out,
                          std::max<int64_t>(1, max_of(c.lens_k)), c.rule_dim(), m.out));
  EXPECT_TRUE(lse_within_rule("lse", in.lse.read(), all.lse, all.naive_lse, c.head_dim));
}

void check_varlen_backward(Device dev, const VarlenCase& c) {
  if (!device_usable(dev)) GTEST_SKIP() << "no usable " << device_name(dev) << " device";
  VarlenInstance in = make_varlen(dev, c, true);
  flashattn::Status st = flashattn::forward(in.fwd_args());
  if (skip_if_unsupported(dev, st)) GTEST_SKIP() << "Unsupported (forward): " << st.message;
  ASSERT_TRUE(st.ok()) << "forward failed: " << st.message;
  CallGuard guard({&in.q, &in.k, &in.v, &in.out, &in.dout, &in.lse, &in.cu_q, &in.cu_k},
                  {&in.dq, &in.dk, &in.dv});
  st = flashattn::backward(in.bwd_args());
  if (skip_if_unsupported(dev, st)) GTEST_SKIP() << "Unsupported (backward): " << st.message;
  ASSERT_TRUE(st.ok()) << "backward failed: " << st.message;
  EXPECT_TRUE(guard.wrote_exactly_outputs());

  const int64_t hdq = c.heads_q * c.head_dim, hdk = c.heads_kv * c.head_dim;
  const int64_t hdo = c.heads_q * c.dim_v(), hdv = c.heads_kv * c.dim_v();
  // The naive yardstick takes D from the O this backward was given, as the
  // padded harness does (naive_same_dtype.hpp).
  const std::vector<double> given_out = in.out.read();
  std::vector<double> dq(in.qd.size(), 0.0), dk(in.kd.size(), 0.0), dv(in.vd.size(), 0.0);
  std::vector<double> ndq = dq, ndk = dk, ndv = dv;
  int64_t oq = 0, ok = 0, col_len = 1, row_len = 1;
  for (size_t b = 0; b < c.lens_q.size(); ++b) {
    const int64_t lq = c.lens_q[b], lk = c.lens_k[b];
    if (lq > 0 && lk > 0) {
      const ref::Problem pb = problem_of(c, lq, lk);
      const auto q = rows(in.qd, oq, lq, hdq), k = rows(in.kd, ok, lk, hdk),
                 v = rows(in.vd, ok, lk, hdv), dout = rows(in.dod, oq, lq, hdo);
      std::vector<double> gq(q.size()), gk(k.size()), gv(v.size()), nq, nk, nv;
      ref::backward(pb, q.data(), k.data(), v.data(), dout.data(), gq.data(), gk.data(), gv.data());
      const auto o = rows(given_out, oq, lq, hdo);
      ref::naive_backward(pb, c.dtype, q, k, v, dout, &nq, &nk, &nv, &o);
      put_rows(&dq, gq, oq, hdq);
      put_rows(&dk, gk, ok, hdk);
      put_rows(&dv, gv, ok, hdv);
      put_rows(&ndq, nq, oq, hdq);
      put_rows(&ndk, nk, ok, hdk);
      put_rows(&ndv, nv, ok, hdv);
    }
    row_len = std::max(row_len, lk);
    col_len = std::max(col_len, std::max(lk, lq * (c.heads_q / c.heads_kv)));
    oq += lq;
    ok += lk;
  }
  const double scale = 1.0 / std::sqrt(static_cast<double>(c.head_dim));
  const auto m = ref::magnitudes(in.qd, in.kd, in.vd, in.dod, c.head_dim, scale, c.dim_v());
  EXPECT_TRUE(within_rule("dq", c.dtype, in.dq.read(), dq, ndq, row_len, c.rule_dim(), m.dq));
  EXPECT_TRUE(within_rule("dk", c.dtype, in.dk.read(), dk, ndk, col_len, c.rule_dim(), m.dk));
  EXPECT_TRUE(within_rule("dv", c.dtype, in.dv.read(), dv, ndv, col_len, c.rule_dim(), m.dv));
  if (c.deterministic) {  // a second run gives the same bits
    const std::vector<double> dq1 = in.dq.read(), dk1 = in.dk.read(), dv1 = in.dv.read();
    st = flashattn::backward(in.bwd_args());
    ASSERT_TRUE(st.ok()) << "second deterministic backward failed: " << st.message;
    EXPECT_TRUE(in.dq.read() == dq1 && in.dk.read() == dk1 && in.dv.read() == dv1)
        << "deterministic backward: a second run gave different gradients";
  }
}

// ---- KV cache ----------------------------------------------------------------------

std::string KvCase::name() const {
  std::ostringstream s;
  s << dtype_tag(dtype) << "_q" << seqlen_q << "_h" << heads_q << "x" << heads_kv << "_d" << head_dim
    << "_cache" << lens_str(cache_lens) << "_cap" << capacity;
  if (s_new) s << "_new" << s_new;
  if (page_size) s << "_page" << page_size;
  if (causal) s << "_causal";
  if (num_splits) s << "_split" << num_splits;
  if (rotary_dim) s << "_rope" << rotary_dim << (rotary_interleaved ? "i" : "");
  if (!leftpad.empty()) s << "_leftpad" << lens_str(leftpad);
  if (extra_entries >= 0) s << "_idx" << extra_entries;
  if (softcap > 0.0f) s << "_softcap" << softcap;
  if (window_left >= 0) s << "_window" << window_left;
  if (nan_outside) s << "_nanrest";
  return s.str();
}

namespace {
// Rotation of one row of d elements at position pos (fp64; the rule of
// flashattn.hpp's KvCacheArgs): element j < rd pairs with j ^ 1 (interleaved)
// or j +- rd / 2, at frequency column j / 2 or j mod rd / 2. Also returns, per
// element, |x c| + |x' s| (the size of the terms an fp32 rotation rounds).
std::vector<double> rotate(const double* x, int64_t d, int64_t rd, bool inter, const double* cs, const double* sn,
                           std::vector<double>* terms) {
  std::vector<double> y(x, x + d);
  terms->assign(static_cast<size_t>(d), 0.0);
  for (int64_t j = 0; j < rd; ++j) {
    int64_t f, partner;
    double sign;
    if (inter) {
      f = j / 2;
      partner = j % 2 ? j - 1 : j + 1;
      sign = j % 2 ? 1.0 : -1.0;
    } else {
      f = j % (rd / 2);
      partner = j < rd / 2 ? j + rd / 2 : j - rd / 2;
      sign = j < rd / 2 ? -1.0 : 1.0;
    }
    y[j] = x[j] * cs[f] + sign * x[partner] * sn[f];
    (*terms)[j] = std::abs(x[j] * cs[f]) + std::abs(x[partner] * sn[f]);
  }
  return y;
}
}  // namespace
void PrintTo(const KvCase& c, std::ostream* os) { *os << c.name(); }

void check_kvcache(Device dev, const KvCase& c) {
  if (!device_usable(dev)) GTEST_SKIP() << "no usable " << device_name(dev) << " device";
  const int64_t B = static_cast<int64_t>(c.cache_lens.size()), D = c.head_dim, Hkv = c.heads_kv;
  const int64_t hdk = Hkv * D, hdq = c.heads_q * D;
  const bool paged = c.page_size > 0, by_idx = c.extra_entries >= 0, rope = c.rotary_dim > 0;
  const int64_t max_pages = paged ? (c.capacity + c.page_size - 1) / c.page_size : 0;
  const int64_t capacity = paged ? max_pages * c.page_size : c.capacity;
  std::mt19937_64 gen(next_seed());

  // Cache storage and, per sequence, the storage row of each logical token.
  Tensor kc, vc, table, idx;
  std::vector<std::vector<int64_t>> where(static_cast<size_t>(B));  // row index into kc's [rows, Hkv, D]
  if (paged) {
    const int64_t num_pages = B * max_pages + 3;  // a few pages nobody uses
    kc = make_contiguous(dev, c.dtype, {num_pages, c.page_size, Hkv, D});
    vc = make_contiguous(dev, c.dtype, {num_pages, c.page_size, Hkv, D});
    std::vector<int32_t> perm(static_cast<size_t>(num_pages));
    std::iota(perm.begin(), perm.end(), 0);
    std::shuffle(perm.begin(), perm.end(), gen);
    std::vector<int32_t> bt(static_cast<size_t>(B * max_pages));
    for (size_t i = 0; i < bt.size(); ++i) bt[i] = perm[i];
    // The table the call gets: entries past a sequence's last page (after
    // the append) are -1, as a serving engine leaves them; no kernel may
    // read them.
    std::vector<int32_t> bt_call = bt;
    for (int64_t b = 0; b < B; ++b) {
      const int64_t used = (c.cache_lens[size_t(b)] + c.s_new + c.page_size - 1) / c.page_size;
      for (int64_t i = used; i < max_pages; ++i) bt_call[size_t(b * max_pages + i)] = -1;
    }
    table = make_i32(dev, bt_call, {B, max_pages});
    for (int64_t b = 0; b < B; ++b)
      for (int64_t t = 0; t < capacity; ++t)
        where[b].push_back(bt[b * max_pages + t / c.page_size] * c.page_size + t % c.page_size);
  } else {
    // With cache_batch_idx: sequence b owns a shuffled entry of B + extra.
    const int64_t entries = by_idx ? B + c.extra_entries : B;
    kc = make_contiguous(dev, c.dtype, {entries, capacity, Hkv, D});
    vc = make_contiguous(dev, c.dtype, {entries, capacity, Hkv, D});
    std::vector<int32_t> entry(static_cast<size_t>(entries));
    std::iota(entry.begin(), entry.end(), 0);
    if (by_idx) {
      std::shuffle(entry.begin(), entry.end(), gen);
      idx = make_i32(dev, std::vector<int32_t>(entry.begin(), entry.begin() + B), {B});
    }
    for (int64_t b = 0; b < B; ++b)
      for (int64_t t = 0; t < capacity; ++t) where[b].push_back(entry[size_t(b)] * capacity + t);
  }
  std::vector<double> k0 = fill_randn(kc), v0 = fill_randn(vc);
  if (c.nan_outside) {
    // Rows outside [leftpad, cache_lens + s_new) of each sequence's entry.
    for (int64_t b = 0; b < B; ++b) {
      const int64_t lo = c.leftpad.empty() ? 0 : c.leftpad[size_t(b)], hi = c.cache_lens[size_t(b)] + c.s_new;
      for (int64_t t = 0; t < capacity; ++t) {
        if (t >= lo && t < hi) continue;
        const int64_t row = where[b][t];
        std::fill(k0.begin() + row * hdk, k0.begin() + (row + 1) * hdk, std::nan(""));
        std::fill(v0.begin() + row * hdk, v0.begin() + (row + 1) * hdk, std::nan(""));
      }
    }
    kc.write(k0);
    vc.write(v0);
  }
  Tensor q = make_bshd(dev, c.dtype, Layout::BSHD, B, c.seqlen_q, c.heads_q, D);
  std::vector<double> qd = fill_randn(q);
  Tensor kn, vn;
  std::vector<double> knd, vnd;
  if (c.s_new || rope) {
    kn = make_bshd(dev, c.dtype, Layout::BSHD, B, c.s_new, Hkv, D);
    vn = make_bshd(dev, c.dtype, Layout::BSHD, B, c.s_new, Hkv, D);
    knd = fill_randn(kn);
    vnd = fill_randn(vn);
  }
  std::vector<int32_t> lens32(c.cache_lens.begin(), c.cache_lens.end());
  Tensor lens = make_i32(dev, lens32, {B});
  Tensor left;
  std::vector<int64_t> lp(static_cast<size_t>(B), 0);
  if (!c.leftpad.empty()) {
    lp = c.leftpad;
    left = make_i32(dev, std::vector<int32_t>(lp.begin(), lp.end()), {B});
  }
  // Rotary tables: position x frequency angles of a 10000-base RoPE, rounded
  // to the dtype (the library and the reference read the same values).
  Tensor cos_t, sin_t;
  std::vector<double> cosd, sind;
  const int64_t ro_len = capacity + c.seqlen_q, rh = c.rotary_dim / 2;
  if (rope) {
    cos_t = make_contiguous(dev, c.dtype, {ro_len, rh});
    sin_t = make_contiguous(dev, c.dtype, {ro_len, rh});
    std::vector<double> cv(static_cast<size_t>(ro_len * rh)), sv(cv.size());
    for (int64_t t = 0; t < ro_len; ++t)
      for (int64_t f = 0; f < rh; ++f) {
        const double ang = static_cast<double>(t) * std::pow(10000.0, -2.0 * f / c.rotary_dim);
        cv[size_t(t * rh + f)] = std::cos(ang);
        sv[size_t(t * rh + f)] = std::sin(ang);
      }
    cos_t.write(cv);
    sin_t.write(sv);
    cosd = cos_t.read();
    sind = sin_t.read();
  }
  Tensor out = make_bshd(dev, c.dtype, Layout::BSHD, B, c.seqlen_q, c.heads_q, D);
  Tensor lse = make_lse(dev, B, c.heads_q, c.seqlen_q);

  flashattn::KvCacheArgs a;
  a.q = q.view();
  a.k_cache = kc.view();
  a.v_cache = vc.view();
  a.cache_seqlens = lens.view();
  if (paged) a.block_table = table.view();
  if (c.s_new || rope) {
    a.k_new = kn.view();
    a.v_new = vn.view();
  }
  if (by_idx) a.cache_batch_idx = idx.view();
  if (left.buf) a.cache_leftpad = left.view();
  if (rope) {
    a.rotary_cos = cos_t.view();
    a.rotary_sin = sin_t.view();
    a.rotary_interleaved = c.rotary_interleaved;
  }
  a.out = out.view();
  a.lse = lse.view();
  a.options.causal = c.causal;
  a.options.softcap = c.softcap;
  a.options.window_left = c.window_left;
  a.num_splits = c.num_splits;
  std::vector<const Tensor*> inputs{&q, &lens};
  if (paged) inputs.push_back(&table);
  if (c.s_new || rope) {
    inputs.push_back(&kn);
    inputs.push_back(&vn);
  }
  for (const Tensor* t : {&idx, &left, &cos_t, &sin_t})
    if (t->buf) inputs.push_back(t);
  CallGuard guard(inputs, {&out, &lse});
  const flashattn::Status st = flashattn::forward_kvcache(a);
  if (skip_if_unsupported(dev, st)) GTEST_SKIP() << "Unsupported: " << st.message;
  ASSERT_TRUE(st.ok()) << "forward_kvcache failed: " << st.message;
  EXPECT_TRUE(guard.wrote_exactly_outputs());

  // The cache after the call: the old contents with the new rows in place
  // (k rotated at its position when rope). An fp32 rotation may land an ulp
  // from the fp64 one, or a few fp32 ulps of its terms where they cancel.
  std::vector<double> k1 = k0, v1 = v0, k_tol(k0.size(), 0.0), terms;
  const double eps32 = std::ldexp(1.0, -23);
  const int mant = c.dtype == DType::F32 ? 23 : c.dtype == DType::F16 ? 10 : 7;
  for (int64_t b = 0; b < B; ++b)
    for (int64_t s = 0; s < c.s_new; ++s) {
      const int64_t row = where[b][c.cache_lens[b] + s], pos = c.cache_lens[b] + s;
      for (int64_t h = 0; h < Hkv; ++h) {
        const double* src = &knd[size_t(((b * c.s_new + s) * Hkv + h) * D)];
        std::vector<double> kr(src, src + D);
        if (rope) kr = rotate(src, D, c.rotary_dim, c.rotary_interleaved, &cosd[size_t(pos * rh)],
                              &sind[size_t(pos * rh)], &terms);
        for (int64_t e = 0; e < D; ++e) {
          const size_t at = size_t(row * hdk + h * D + e);
          k1[at] = round_to(c.dtype, static_cast<float>(kr[size_t(e)]));
          if (rope && e < c.rotary_dim) {
            const double mag = std::max(std::abs(k1[at]), std::ldexp(1.0, -14));
            k_tol[at] = std::ldexp(1.0, static_cast<int>(std::floor(std::log2(mag))) - mant) +
                        4 * eps32 * terms[size_t(e)];
          }
        }
      }
      for (int64_t x = 0; x < hdk; ++x) v1[row * hdk + x] = vnd[(b * c.s_new + s) * hdk + x];
    }
  const std::vector<double> k_after = kc.read();
  int64_t k_bad = 0, first = -1;
  auto both_nan = [](double a, double b) { return std::isnan(a) && std::isnan(b); };
  for (size_t x = 0; x < k1.size(); ++x)
    if (!(std::abs(k_after[x] - k1[x]) <= k_tol[x]) && !both_nan(k_after[x], k1[x])) {
      if (first < 0) first = static_cast<int64_t>(x);
      ++k_bad;
    }
  EXPECT_EQ(k_bad, 0) << "k_cache after the call differs from old cache + k_new (rotated when rope) at "
                      << k_bad << " elements; first at " << first << ": " << (first >= 0 ? k_after[first] : 0)
                      << " vs " << (first >= 0 ? k1[first] : 0);
  const std::vector<double> v_after = vc.read();
  bool v_same = v_after.size() == v1.size();
  for (size_t x = 0; v_same && x < v1.size(); ++x) v_same = v_after[x] == v1[x] || both_nan(v_after[x], v1[x]);
  EXPECT_TRUE(v_same) << "v_cache after the call differs from old cache + v_new";

  // q as the attention sees it: rotated at cache_seqlens[b] (+ i when causal).
  if (rope) {
    for (int64_t b = 0; b < B; ++b)
      for (int64_t i = 0; i < c.seqlen_q; ++i) {
        const int64_t pos = c.cache_lens[b] + (c.causal ? i : 0);
        for (int64_t h = 0; h < c.heads_q; ++h) {
          double* row = &qd[size_t(((b * c.seqlen_q + i) * c.heads_q + h) * D)];
          const std::vector<double> r = rotate(row, D, c.rotary_dim, c.rotary_interleaved, &cosd[size_t(pos * rh)],
                                               &sind[size_t(pos * rh)], &terms);
          for (int64_t e = 0; e < D; ++e) row[e] = round_to(c.dtype, static_cast<float>(r[size_t(e)]));
        }
      }
  }

  std::vector<double> eo(qd.size()), no(qd.size()), el(static_cast<size_t>(B * c.heads_q * c.seqlen_q)),
      nl(el.size());
  int64_t max_len = 1;
  for (int64_t b = 0; b < B; ++b) {
    const int64_t lk = c.cache_lens[b] + c.s_new - lp[size_t(b)];
    max_len = std::max(max_len, lk);
    VarlenCase vc1;
    vc1.heads_q = c.heads_q;
    vc1.heads_kv = Hkv;
    vc1.head_dim = D;
    vc1.causal = c.causal;
    vc1.softcap = c.softcap;
    vc1.window_left = c.window_left;
    SeqProblem s{problem_of(vc1, c.seqlen_q, lk), rows(qd, b * c.seqlen_q, c.seqlen_q, hdq), {}, {}, {}};
    for (int64_t t = lp[size_t(b)]; t < c.cache_lens[b] + c.s_new; ++t) {
      const int64_t row = where[b][t];
      s.k.insert(s.k.end(), k1.begin() + row * hdk, k1.begin() + (row + 1) * hdk);
      s.v.insert(s.v.end(), v1.begin() + row * hdk, v1.begin() + (row + 1) * hdk);
    }
    Results r;
    run_forward(s, c.dtype, &r);
    put_rows(&eo, r.out, b * c.seqlen_q, hdq);
    put_rows(&no, r.naive_out, b * c.seqlen_q, hdq);
    std::copy(r.lse.begin(), r.lse.end(), el.begin() + b * c.heads_q * c.seqlen_q);
    std::copy(r.naive_lse.begin(), r.naive_lse.end(), nl.begin() + b * c.heads_q * c.seqlen_q);
  }
  const double scale = 1.0 / std::sqrt(static_cast<double>(D));
  // Magnitudes over the rows the sequences see (NaN rows elsewhere: nan_outside).
  auto finite = [](std::vector<double> x) {
    for (double& e : x)
      if (std::isnan(e)) e = 0.0;
    return x;
  };
  const auto m = ref::magnitudes(qd, finite(k1), finite(v1), {}, D, scale);
  EXPECT_TRUE(within_rule("out", c.dtype, out.read(), eo, no, max_len, D, m.out));
  EXPECT_TRUE(lse_within_rule("lse", lse.read(), el, nl, D));
}

}  // namespace fa_test
