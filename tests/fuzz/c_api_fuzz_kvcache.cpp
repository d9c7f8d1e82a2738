// KV-cache calls through the C ABI (fa_forward_kvcache): a contiguous cache
// [B, capacity, Hkv, D] (with cache_leftpad sometimes) or a paged one
// [num_pages, page_size, Hkv, D] with a block table of distinct pages, both in
// fuzzed layouts; cache_seqlens from 0 to full; k_new / v_new appended in
// place or not; split counts; cache_batch_idx over a contiguous cache of
// spare entries (distinct when appending, shared entries allowed when not);
// and then zero or more mutations that break one
// of forward_kvcache's rules. The oracle is the padded calls' (c_api_fuzz.cpp):
// a mutated call is refused with a message and no byte changed (the caches
// included); a valid one writes out (and lse) exactly, writes k_new / v_new
// into rows cache_seqlens[b] .. + S_new - 1 of each sequence and no other
// cache byte, leaves every input as it was, and each sequence's rows match the
// fp64 reference over its keys [cache_leftpad[b], cache_seqlens[b] + S_new).
// (Rotary embeddings are left to tests/kvcache_test.cpp.)
#include "fuzz/fuzz_harness.hpp"

namespace fa_fuzz {
namespace {

T index_tensor(const std::vector<int32_t>& values, int ndim, const int64_t* shape) {
  T x;
  x.t.dtype = FA_I32;
  x.t.ndim = ndim;
  int64_t stride = 1;
  for (int i = ndim - 1; i >= 0; --i) {
    x.t.shape[i] = shape[i];
    x.t.stride[i] = stride;
    stride *= shape[i];
  }
  auto st = std::make_shared<Storage>();
  st->size = std::max<size_t>(values.size(), 1) * sizeof(int32_t);
  st->bytes.reset(new uint8_t[st->size]);
  if (!values.empty()) std::memcpy(st->bytes.get(), values.data(), values.size() * sizeof(int32_t));
  x.st = st;
  x.t.data = st->bytes.get();
  return x;
}

int32_t* ints(T& x) { return reinterpret_cast<int32_t*>(x.st->bytes.get()); }

enum KvMutation {
  mLensDtype, mLensShape, mLensNegative, mLensOverflow, mLensNull, mPageOutside, mPageSize,
  mTableBatch, mNewAlone, mNewHeads, mNewBatch, mHeadDim, mCacheDtype, mVCacheShape,
  mLeftpadPastEnd, mLeftpadPaged, mOutShape, mLseShape, mSplits, mScale, mOverlapOut,
  mNullArgs, mCacheBatch, mIdxOutside, mIdxShared, mIdxPaged, mIdxShape, mMutations
};

struct KvCall {
  Problem pb;                 // B sequences of Sq queries; Hq, Hkv, D
  std::vector<int32_t> lens;  // cache_seqlens
  std::vector<int32_t> left;  // cache_leftpad (empty: none)
  std::vector<int32_t> table; // block table, B x max_pages (empty: contiguous)
  std::vector<int32_t> idx;   // cache_batch_idx (empty: none; then entry b is sequence b's)
  int64_t capacity = 0, s_new = 0, page = 0, max_pages = 0, num_pages = 0, entries = 0;
  int32_t splits = 0;
  T q, kc, vc, kn, vn, out, lse, tlens, tleft, ttable, tidx;
  fa_options opt{};
  std::vector<T*> all() { return {&q, &kc, &vc, &kn, &vn, &out, &lse, &tlens, &tleft, &ttable, &tidx}; }
  // The cache row (element offset of [.., row, h, 0] in kc / vc) of sequence b's token t.
  int64_t row_offset(const T& c, int64_t b, int64_t t) const {
    if (page > 0) return table[size_t(b * max_pages + t / page)] * c.t.stride[0] + (t % page) * c.t.stride[1];
    return (idx.empty() ? b : idx[size_t(b)]) * c.t.stride[0] + t * c.t.stride[1];
  }
};

bool mutate(Bytes& in, KvCall& c, int m, bool* null_args) {
  const int64_t B = c.pb.B;
  switch (m) {
    case mLensDtype:
      c.tlens.t.dtype = in.chance(128) ? FA_F32 : FA_F16;
      return true;
    case mLensShape:
      c.tlens.t.shape[0] += 1;  // never read: refused on the shape
      return true;
    case mLensNegative:
      if (B < 1 || !c.tlens.st) return false;
      ints(c.tlens)[in.below(B)] = -1 - int32_t(in.below(4));
      return true;
    case mLensOverflow:  // past the capacity once the new tokens are added
      if (B < 1 || !c.tlens.st) return false;
      ints(c.tlens)[in.below(B)] = int32_t(c.capacity - c.s_new + 1 + in.below(3));
      return true;
    case mLensNull:
      if (B < 1) return false;
      c.tlens.t.data = nullptr;
      c.tlens.st = nullptr;
      return true;
    case mPageOutside: {  // a page the sequence uses that is not in the cache
      if (c.page == 0 || B < 1) return false;
      const int64_t b = in.below(B);
      const int64_t used = (c.lens[size_t(b)] + c.s_new + c.page - 1) / c.page;
      if (used == 0) return false;
      ints(c.ttable)[b * c.max_pages + in.below(used)] =
          in.chance(128) ? int32_t(c.num_pages + in.below(3)) : -1;
      return true;
    }
    case mPageSize:  // rows per page not a multiple of 16
      if (c.page == 0) return false;
      c.kc.t.shape[1] = c.vc.t.shape[1] = c.page - 8;
      return true;
    case mTableBatch:
      if (c.page == 0) return false;
      c.ttable.t.shape[0] += 1;
      return true;
    case mNewAlone:  // k_new without v_new
      if (c.s_new == 0) return false;
      c.vn.t.data = nullptr;
      c.vn.st = nullptr;
      return true;
    case mNewHeads:
      if (c.s_new == 0) return false;
      c.kn.t.shape[2] += 1;
      return true;
    case mNewBatch:
      if (c.s_new == 0) return false;
      c.vn.t.shape[0] += 1;
      return true;
    case mHeadDim:
      c.q.t.shape[3] += 8;
      return true;
    case mCacheDtype:
      c.vc.t.dtype = c.vc.t.dtype == FA_F32 ? FA_BF16 : FA_F32;
      return true;
    case mVCacheShape:
      c.vc.t.shape[1] += in.chance(128) ? 16 : -1;
      return true;
    case mLeftpadPastEnd:
      if (c.left.empty() || B < 1) return false;
      {
        const int64_t b = in.below(B);
        ints(c.tleft)[b] = c.lens[size_t(b)] + 1 + int32_t(in.below(3));
      }
      return true;
    case mLeftpadPaged:  // a leftpad beside a block table
      if (c.page == 0 || B < 1) return false;
      {
        const int64_t shape[1] = {B};
        c.tleft = index_tensor(std::vector<int32_t>(size_t(B), 0), 1, shape);
      }
      return true;
    case mOutShape:
      c.out.t.shape[1 + in.below(3)] += 1;
      return true;
    case mLseShape:
      if (!c.lse.t.data) return false;
      c.lse.t.shape[in.below(3)] += 1;
      return true;
    case mSplits:
      c.splits = -1 - int32_t(in.below(4));
      return true;
    case mScale:
      c.opt.softmax_scale = std::numeric_limits<float>::quiet_NaN();
      return true;
    case mOverlapOut:  // out inside the cache or inside q
      if (c.out.numel() == 0) return false;
      {
        T& i = in.chance(128) ? c.q : c.kc;
        if (!i.st || i.numel() == 0) return false;
        c.out.st = i.st;
        c.out.off = i.off;
        c.out.t.data = i.t.data;
      }
      return true;
    case mNullArgs:
      *null_args = true;
      return true;
    case mCacheBatch:  // a contiguous cache of another batch, no index
      if (c.page > 0 || !c.idx.empty()) return false;
      c.kc.t.shape[0] = c.vc.t.shape[0] = B + 1;
      return true;
    case mIdxOutside:  // an entry the cache does not have
      if (c.idx.empty() || B < 1) return false;
      ints(c.tidx)[in.below(B)] = in.chance(128) ? int32_t(c.entries + in.below(3)) : -1 - int32_t(in.below(3));
      return true;
    case mIdxShared:  // two sequences appending to one entry
      if (c.idx.empty() || c.s_new == 0 || B < 2) return false;
      ints(c.tidx)[1] = c.idx[0];
      return true;
    case mIdxPaged:  // an index beside a block table
      if (c.page == 0 || B < 1) return false;
      {
        const int64_t shape[1] = {B};
        c.tidx = index_tensor(std::vector<int32_t>(size_t(B), 0), 1, shape);
      }
      return true;
    case mIdxShape:
      if (c.idx.empty()) return false;
      c.tidx.t.shape[0] += 1;
      return true;
  }
  return false;
}

}  // namespace

void run_kvcache(Bytes& in, const Problem& drawn, std::mt19937& rng, std::mt19937& pick, float amp) {
  KvCall c;
  Problem& pb = c.pb;
  pb = drawn;
  pb.D = (pb.D + 7) / 8 * 8;  // forward_kvcache takes multiples of 8 (run_one may draw others)
  pb.Dv = pb.D;  // one head dim for K and V (forward_kvcache)
  pb.fp8 = false;
  if (pb.Hkv == 0) pb.Hkv = 1, pb.Hq = std::max<int64_t>(pb.Hq, 1);
  if (pb.B > 0) pb.B = 1 + int64_t(pick() % 3);
  pb.Sq = 1 + int64_t(pick() % 4);  // a few new query tokens per sequence
  c.s_new = pick() % 3 == 0 ? 0 : 1 + int64_t(pick() % uint32_t(pb.Sq + 1));
  c.page = pick() % 3 == 0 ? 16 * (1 + int64_t(pick() % 2)) : 0;
  // Capacity: up to the drawn key length plus the new tokens (whole pages).
  const int64_t want = std::max<int64_t>(pb.Sk, 1) + c.s_new + int64_t(pick() % 8);
  if (c.page > 0) {
    c.max_pages = (want + c.page - 1) / c.page;
    c.capacity = c.max_pages * c.page;
  } else {
    c.capacity = want;
  }
  const int64_t B = pb.B;
  for (int64_t b = 0; b < B; ++b) {
    const int64_t room = c.capacity - c.s_new;
    c.lens.push_back(int32_t(pick() % 5 == 0 ? room : int64_t(pick() % uint32_t(room + 1))));
  }
  if (c.page == 0 && pick() % 4 == 0) {
    for (int64_t b = 0; b < B; ++b) c.left.push_back(int32_t(pick() % uint32_t(c.lens[size_t(b)] + 1)));
  }
  c.entries = B;
  if (c.page == 0 && B > 0 && pick() % 4 == 0) {  // cache_batch_idx over spare entries
    c.entries = B + int64_t(pick() % 3);
    std::vector<int32_t> ids(size_t(c.entries));
    for (size_t i = 0; i < ids.size(); ++i) ids[i] = int32_t(i);
    std::shuffle(ids.begin(), ids.end(), pick);
    for (int64_t b = 0; b < B; ++b)  // appends need their own entry; reads may share one
      c.idx.push_back(c.s_new > 0 || pick() % 2 ? ids[size_t(b)] : ids[pick() % ids.size()]);
  }
  if (c.page > 0) {  // distinct pages in a shuffled order, a few spare ones
    c.num_pages = B * c.max_pages + int64_t(pick() % 3);
    std::vector<int32_t> ids(size_t(c.num_pages));
    for (size_t i = 0; i < ids.size(); ++i) ids[i] = int32_t(i);
    std::shuffle(ids.begin(), ids.end(), pick);
    c.table.assign(ids.begin(), ids.begin() + B * c.max_pages);
  }
  c.splits = pick() % 3 == 0 ? int32_t(1 + pick() % 4) : 0;
  c.opt = pb.opt;

  const int64_t qshape[4] = {B, pb.Sq, pb.Hq, pb.D}, nshape[4] = {B, c.s_new, pb.Hkv, pb.D};
  const int64_t cshape[4] = {c.page > 0 ? c.num_pages : c.entries, c.page > 0 ? c.page : c.capacity, pb.Hkv, pb.D};
  for (T* t : {&c.q, &c.kc, &c.vc, &c.kn, &c.vn, &c.out}) t->t.dtype = pb.dtype;
  layout(in, c.q, qshape);
  layout(in, c.kc, cshape);
  layout(in, c.vc, cshape);
  layout(in, c.out, qshape);
  allocate(in, c.q, true, rng, amp);
  allocate(in, c.kc, true, rng, amp);
  allocate(in, c.vc, true, rng, amp);
  allocate(in, c.out, false, rng, amp);
  if (c.s_new > 0) {
    layout(in, c.kn, nshape);
    layout(in, c.vn, nshape);
    allocate(in, c.kn, true, rng, amp);
    allocate(in, c.vn, true, rng, amp);
  }
  if (pb.with_lse) {
    c.lse.t.dtype = FA_F32;
    c.lse.t.ndim = 3;
    c.lse.t.shape[0] = B; c.lse.t.shape[1] = pb.Hq; c.lse.t.shape[2] = pb.Sq;
    c.lse.t.stride[2] = 1; c.lse.t.stride[1] = pb.Sq; c.lse.t.stride[0] = pb.Hq * pb.Sq;
    allocate(in, c.lse, false, rng, amp);
  }
  {
    const int64_t s1[1] = {B}, s2[2] = {B, c.max_pages};
    c.tlens = index_tensor(c.lens, 1, s1);
    if (!c.left.empty()) c.tleft = index_tensor(c.left, 1, s1);
    if (c.page > 0) c.ttable = index_tensor(c.table, 2, s2);
    if (!c.idx.empty()) c.tidx = index_tensor(c.idx, 1, s1);
  }

  bool null_args = false;
  int mutations = 0;
  const int64_t nmut = in.chance(110) ? 1 + in.below(2) : 0;
  std::string applied;
  bool used[mMutations] = {};
  for (int64_t i = 0; i < nmut; ++i) {
    const int m = int(in.below(mMutations));
    if (used[m]) continue;
    if (mutate(in, c, m, &null_args)) {
      used[m] = true;
      ++mutations;
      applied += " " + std::to_string(m);
    }
  }
  auto list = [](const std::vector<int32_t>& v) {
    std::string s;
    for (int32_t x : v) s += " " + std::to_string(x);
    return s;
  };
  g_case = "kvcache dtype " + std::to_string(pb.dtype) + " B " + std::to_string(B) + " Sq " +
           std::to_string(pb.Sq) + " Hq " + std::to_string(pb.Hq) + " Hkv " + std::to_string(pb.Hkv) +
           " D " + std::to_string(pb.D) + " capacity " + std::to_string(c.capacity) + " page " +
           std::to_string(c.page) + " s_new " + std::to_string(c.s_new) + " lens" + list(c.lens) +
           (c.left.empty() ? std::string() : " leftpad" + list(c.left)) +
           (c.idx.empty() ? std::string() : " entries " + std::to_string(c.entries) + " idx" + list(c.idx)) + " splits " +
           std::to_string(c.splits) + " scale " + g_fmt(c.opt.softmax_scale) + " softcap " +
           g_fmt(c.opt.softcap) + " window " + std::to_string(c.opt.window_left) + "," +
           std::to_string(c.opt.window_right) + " causal " + std::to_string(c.opt.causal) + " amp " +
           std::to_string(amp) + " lse " + std::to_string(pb.with_lse) + " mutations" + applied;
  if (std::getenv("FA_FUZZ_DEBUG")) std::fprintf(stderr, "call: %s\n", g_case.c_str());
  Snapshot snap;
  for (T* t : c.all()) snap.add(*t);

  fa_kvcache_args a{};
  a.q = c.q.t;
  a.k_cache = c.kc.t;
  a.v_cache = c.vc.t;
  a.cache_seqlens = c.tlens.t;
  a.block_table = c.ttable.t;
  a.k_new = c.kn.t;
  a.v_new = c.vn.t;
  a.out = c.out.t;
  a.lse = c.lse.t;
  a.options = c.opt;
  a.num_splits = c.splits;
  a.cache_leftpad = c.tleft.t;
  a.cache_batch_idx = c.tidx.t;
  const fa_status st = fa_forward_kvcache(null_args ? nullptr : &a);
  if (!expect_status(st, mutations, snap)) return;

  // The caches: the snapshot with k_new / v_new written at each sequence's
  // rows lens[b] .. + s_new - 1; every other tensor but out / lse as it was.
  const size_t es = esize(pb.dtype);
  for (const auto& buf : snap.bufs) {
    std::vector<uint8_t> want = buf.second;
    for (auto [cache, nw] : {std::pair<const T*, const T*>{&c.kc, &c.kn}, {&c.vc, &c.vn}}) {
      if (buf.first != cache->st || c.s_new == 0) continue;
      for (int64_t b = 0; b < B; ++b)
        for (int64_t s = 0; s < c.s_new; ++s)
          for (int64_t h = 0; h < pb.Hkv; ++h)
            for (int64_t e = 0; e < pb.D; ++e) {
              const int64_t dst = c.row_offset(*cache, b, c.lens[size_t(b)] + s) + h * cache->t.stride[2] + e;
              const int64_t src = b * nw->t.stride[0] + s * nw->t.stride[1] + h * nw->t.stride[2] + e;
              std::memcpy(want.data() + cache->off + size_t(dst) * es,
                          nw->st->bytes.get() + nw->off + size_t(src) * es, es);
            }
    }
    const bool output = buf.first == c.out.st || (c.lse.st && buf.first == c.lse.st);
    if (!output && std::memcmp(buf.first->bytes.get(), want.data(), want.size()) != 0)
      fail("inputs", "an input or cache byte differs from what the append should leave");
  }
  expect_written_exactly("out", c.out);
  if (pb.with_lse) expect_written_exactly("lse", c.lse);

  // Each sequence against the reference over its keys (the cache after the
  // append, from its leftpad row).
  const std::vector<double> q = read_dense(c.q), out = read_dense(c.out);
  const std::vector<double> lse = pb.with_lse ? read_dense(c.lse) : std::vector<double>{};
  auto cache_rows = [&](const T& cache, int64_t b, int64_t t0, int64_t t1) {
    std::vector<double> v;
    const uint8_t* base = cache.st->bytes.get() + cache.off;
    for (int64_t t = t0; t < t1; ++t)
      for (int64_t h = 0; h < pb.Hkv; ++h)
        for (int64_t e = 0; e < pb.D; ++e)
          v.push_back(load(pb.dtype, base + size_t(c.row_offset(cache, b, t) + h * cache.t.stride[2] + e) * es));
    return v;
  };
  const int64_t wq = pb.Sq * pb.Hq * pb.D;
  for (int64_t b = 0; b < B; ++b) {
    const int64_t t0 = c.left.empty() ? 0 : c.left[size_t(b)], t1 = c.lens[size_t(b)] + c.s_new;
    Problem one = pb;
    one.op = 0;
    one.B = 1;
    one.Sk = t1 - t0;
    one.opt = c.opt;
    Dense d;
    d.q.assign(q.begin() + b * wq, q.begin() + (b + 1) * wq);
    d.k = cache_rows(c.kc, b, t0, t1);
    d.v = cache_rows(c.vc, b, t0, t1);
    d.out.assign(out.begin() + b * wq, out.begin() + (b + 1) * wq);
    if (pb.with_lse) {
      const int64_t wl = pb.Hq * pb.Sq;
      d.lse.assign(lse.begin() + b * wl, lse.begin() + (b + 1) * wl);
    }
    g_case += b == 0 ? " | sequence 0" : " " + std::to_string(b);
    judge(one, d);
  }
}

}  // namespace fa_fuzz
