#include "support/sweep.hpp"

#include <initializer_list>
#include <set>

namespace fa_test {
namespace {

const DType kDtypes[] = {DType::F32, DType::F16, DType::BF16};
const Layout kLayouts[] = {Layout::BSHD, Layout::BHSD, Layout::Padded, Layout::Packed};

void set_gqa(Case& c, int ratio) {
  // ratio 1: 2 heads (MHA); 2: 4 q heads on 2 kv heads; 8: 8 on 1 (MQA).
  c.heads_kv = ratio == 8 ? 1 : 2;
  c.heads_q = c.heads_kv * ratio;
}

std::vector<Case> dedupe(std::vector<Case> in) {
  std::set<std::string> seen;
  std::vector<Case> out;
  for (Case& c : in)
    if (seen.insert(c.name()).second) out.push_back(c);
  return out;
}

}  // namespace

std::vector<Case> small_cases() {
  std::vector<Case> v;
  const int64_t lens[] = {1, 17, 113};
  size_t idx = 0;
  for (DType dt : kDtypes)
    for (int64_t d : {8, 64, 72, 128, 256})
      for (int64_t sq : lens)
        for (int64_t sk : lens)
          for (bool causal : {false, true})
            for (int ratio : {1, 2, 8}) {
              Case c;
              c.dtype = dt;
              c.head_dim = d;
              c.seqlen_q = sq;
              c.seqlen_k = sk;
              c.causal = causal;
              set_gqa(c, ratio);
              c.layout = kLayouts[idx % 4];
              c.batch = idx % 3 == 0 ? 2 : 1;
              ++idx;
              v.push_back(c);
            }
  return dedupe(v);
}

std::vector<Case> large_cases(bool backward) {
  std::vector<Case> v;
  size_t idx = 0;
  auto add = [&](DType dt, int64_t d, int64_t sq, int64_t sk, bool causal, int ratio) {
    Case c;
    c.dtype = dt;
    c.head_dim = d;
    c.seqlen_q = sq;
    c.seqlen_k = sk;
    c.causal = causal;
    set_gqa(c, ratio);
    c.layout = kLayouts[idx++ % 4];
    v.push_back(c);
  };
  // 267: Sq != Sk both ways, every dtype, most head dims (8 and 72 run on the
  // next tile up, 64 and 128; 192 is a tile of its own on Hopper, forward and
  // backward).
  for (DType dt : kDtypes)
    for (int64_t d : {8, 72, 128, 192, 256})
      for (auto [sq, sk] : {std::pair<int64_t, int64_t>{267, 267}, {267, 17}, {17, 267}, {1, 267}})
        for (bool causal : {false, true}) add(dt, d, sq, sk, causal, idx % 3 == 0 ? 8 : 2);
  // 1030: batch 1, few heads, a few head dims (the fp64 reference is the cost).
  for (DType dt : kDtypes)
    for (int64_t d : {64, 128})
      for (bool causal : {false, true}) {
        add(dt, d, 1030, 1030, causal, 1);
        add(dt, d, 267, 1030, causal, 2);
        if (!backward) add(dt, d, 1030, 113, causal, 1);  // Sq > Sk causal: empty rows
        add(dt, d, 1, 1030, causal, 8);                   // decode
      }
  for (DType dt : kDtypes) {
    add(dt, 256, 1030, 1030, true, 1);
    if (!backward) add(dt, 256, 1030, 267, false, 2);
  }
  if (backward) {
    for (DType dt : kDtypes) add(dt, 64, 1030, 113, true, 1);
  }
  // Batch > 1 at a medium size.
  for (DType dt : kDtypes) {
    Case c;
    c.dtype = dt;
    c.batch = 3;
    c.seqlen_q = 113;
    c.seqlen_k = 267;
    c.heads_q = 4;
    c.heads_kv = 2;
    c.head_dim = 64;
    c.causal = true;
    c.layout = Layout::Padded;
    v.push_back(c);
  }
  return dedupe(v);
}

std::vector<Case> feature_cases() {
  std::vector<Case> v;
  for (DType dt : kDtypes) {
    // Sliding windows, with and without causal, Sq != Sk both ways.
    struct W {
      int64_t l, r;
    };
    for (W w : {W{0, 0}, W{16, 0}, W{32, 8}, W{-1, 5}, W{7, -1}, W{100, 100}})
      for (auto [sq, sk] : {std::pair<int64_t, int64_t>{113, 113}, {113, 267}, {267, 113}})
        for (bool causal : {false, true}) {
          if (causal && w.r > 0 && w.l == -1) continue;  // same as causal alone
          Case c;
          c.dtype = dt;
          c.seqlen_q = sq;
          c.seqlen_k = sk;
          c.heads_q = 4;
          c.heads_kv = 2;
          c.head_dim = 64;
          c.window_left = w.l;
          c.window_right = w.r;
          c.causal = causal;
          v.push_back(c);
        }
    // Softcap (small caps bend many scores), with a custom scale, GQA, causal.
    for (float cap : {1.0f, 5.0f, 30.0f})
      for (bool causal : {false, true})
        for (int64_t d : {64, 128}) {
          Case c;
          c.dtype = dt;
          c.seqlen_q = 113;
          c.seqlen_k = 267;
          c.heads_q = 8;
          c.heads_kv = 1;
          c.head_dim = d;
          c.softcap = cap;
          c.causal = causal;
          c.scale = cap == 5.0f ? 0.3f : 0.0f;
          v.push_back(c);
        }
    // Softcap at head dim 256 (the Hopper forward's third softcap tile).
    {
      Case c;
      c.dtype = dt;
      c.seqlen_q = 130;
      c.seqlen_k = 301;
      c.heads_q = 4;
      c.heads_kv = 2;
      c.head_dim = 256;
      c.softcap = 30.0f;
      c.causal = true;
      v.push_back(c);
    }
    // Softcap together with a sliding window.
    {
      Case c;
      c.dtype = dt;
      c.seqlen_q = c.seqlen_k = 267;
      c.heads_q = c.heads_kv = 2;
      c.head_dim = 128;
      c.softcap = 2.0f;
      c.window_left = 20;
      c.window_right = 3;
      v.push_back(c);
    }
    // Explicit scale (large, so the softmax is peaked), no LSE output.
    for (float scale : {0.05f, 1.0f}) {
      Case c;
      c.dtype = dt;
      c.seqlen_q = 17;
      c.seqlen_k = 113;
      c.heads_q = c.heads_kv = 2;
      c.head_dim = 72;
      c.scale = scale;
      v.push_back(c);
    }
    {
      Case c;
      c.dtype = dt;
      c.seqlen_q = 113;
      c.seqlen_k = 113;
      c.heads_q = 4;
      c.heads_kv = 4;
      c.head_dim = 64;
      c.causal = true;
      c.with_lse = false;
      v.push_back(c);
    }
    // Each layout explicitly, MHA and GQA, square and not.
    for (Layout l : kLayouts)
      for (int ratio : {1, 8})
        for (auto [sq, sk] : {std::pair<int64_t, int64_t>{267, 267}, {113, 267}}) {
          Case c;
          c.dtype = dt;
          c.seqlen_q = sq;
          c.seqlen_k = sk;
          set_gqa(c, ratio);
          c.head_dim = 128;
          c.batch = 2;
          c.causal = sq == sk;
          c.layout = l;
          v.push_back(c);
        }
  }
  return dedupe(v);
}

std::vector<Case> many_tile_cases() {
  std::vector<Case> v;
  // Rows past 128 (past 192 at head dim 128, whose tiles have 192 rows)
  // give every head two query tiles; batch x heads of 136-192 then make
  // 272-384 tiles (2-3 per CTA), at a fp64 reference cost of 0.6-2.6 GFLOP
  // per case.
  auto add = [&](DType dt, int64_t d, int64_t batch, int64_t hq, int64_t hkv, int64_t sq, int64_t sk,
                 bool causal, int64_t wl, int64_t wr) {
    Case c;
    c.dtype = dt;
    c.head_dim = d;
    c.batch = batch;
    c.heads_q = hq;
    c.heads_kv = hkv;
    c.seqlen_q = sq;
    c.seqlen_k = sk;
    c.causal = causal;
    c.window_left = wl;
    c.window_right = wr;
    c.layout = Layout::BSHD;
    v.push_back(c);
  };
  add(DType::BF16, 64, 3, 48, 6, 129, 129, true, -1, -1);    // GQA 8
  add(DType::F16, 64, 2, 96, 12, 200, 67, true, -1, -1);     // Sq > Sk: empty rows
  add(DType::BF16, 128, 2, 68, 68, 193, 193, false, 31, 5);  // window both sides
  add(DType::F16, 128, 2, 68, 34, 193, 301, true, -1, -1);   // Sq < Sk, GQA 2
  add(DType::BF16, 256, 1, 136, 17, 129, 129, true, -1, -1);
  add(DType::F16, 192, 2, 68, 17, 200, 333, false, -1, -1);  // Hopper's 192 tile, GQA 4
  add(DType::BF16, 168, 1, 136, 136, 131, 131, true, -1, -1);  // zero-filled columns of it
  // Head dim 128 without a mask, where the Hopper forward picks its tile by
  // the wave count on 132 SMs (tile_rules.hpp): 132 tiles of 192 rows (one
  // wave; 198 of 128 rows would be two), and 408 tiles of 128 rows (4 waves
  // against 272 of 192 rows in 3).
  add(DType::BF16, 128, 1, 66, 22, 384, 401, false, -1, -1);
  add(DType::F16, 128, 1, 136, 136, 257, 250, false, -1, -1);
  // Head dim 64 without a mask from 4096 keys: the Hopper forward's 192-row
  // kernel whose warpgroups take turns (tile_rules.hpp hd64_turns_pay), over
  // key tiles of 128 with a last one of 7 / 3 keys.
  add(DType::BF16, 64, 1, 8, 2, 200, 4103, false, -1, -1);
  add(DType::F16, 64, 2, 4, 4, 131, 4099, false, -1, -1);
  return dedupe(v);
}

namespace {

// Head-dim shapes: one case per dtype and shape.
struct DimShape {
  int64_t d, dv, b, sq, sk, hq, hkv;
  bool causal;
  Layout layout;
};

std::vector<Case> dim_shape_cases(std::initializer_list<DimShape> shapes) {
  std::vector<Case> v;
  for (DType dt : kDtypes) {
    for (const DimShape& sh : shapes) {
      Case c;
      c.dtype = dt;
      c.head_dim = sh.d;
      c.head_dim_v = sh.dv;
      c.batch = sh.b;
      c.seqlen_q = sh.sq;
      c.seqlen_k = sh.sk;
      c.heads_q = sh.hq;
      c.heads_kv = sh.hkv;
      c.causal = sh.causal;
      c.layout = sh.layout;
      v.push_back(c);
    }
  }
  return v;
}

}  // namespace

std::vector<Case> head_dim_v_cases() {
  std::vector<Case> v = dim_shape_cases({
      {192, 128, 1, 113, 113, 4, 2, true, Layout::BSHD},     // DeepSeek's prefill dims
      {192, 128, 2, 113, 267, 8, 1, false, Layout::Packed},  // K/V rows of [K | V], Sq != Sk
      {128, 192, 1, 267, 113, 4, 4, true, Layout::BHSD},     // v wider; rows that see no key
      {64, 128, 2, 17, 17, 2, 1, false, Layout::Packed},     // one [Q | K | V] buffer
      {72, 40, 1, 1, 267, 8, 2, false, Layout::Padded},      // decode-like, neither a tile size
      {32, 256, 1, 17, 113, 2, 2, true, Layout::BSHD},
  });
  for (DType dt : kDtypes) {
    // A window with softcap; and the deterministic backward without an LSE
    // request in the forward.
    Case w;
    w.dtype = dt;
    w.head_dim = 128;
    w.head_dim_v = 64;
    w.seqlen_q = w.seqlen_k = 113;
    w.heads_q = 4;
    w.heads_kv = 2;
    w.window_left = 32;
    w.window_right = 8;
    w.softcap = 5.0f;
    v.push_back(w);
    Case d;
    d.dtype = dt;
    d.head_dim = 256;
    d.head_dim_v = 128;
    d.batch = 2;
    d.seqlen_q = d.seqlen_k = 17;
    d.heads_q = d.heads_kv = 2;
    d.causal = true;
    d.with_lse = false;
    d.deterministic = true;
    v.push_back(d);
  }
  return v;
}

std::vector<Case> odd_head_dim_cases() {
  return dim_shape_cases({
      {100, 100, 2, 113, 267, 8, 2, true, Layout::BSHD},  // GQA, Sq != Sk
      {36, 36, 1, 17, 113, 4, 4, false, Layout::Packed},  // one [Q | K | V] buffer of 108-column rows
      {3, 3, 1, 33, 33, 2, 1, true, Layout::BHSD},
      {250, 250, 1, 65, 17, 2, 2, true, Layout::Padded},  // causal, Sq > Sk: rows 0-47 see no key
      {100, 70, 1, 113, 113, 4, 2, false, Layout::BSHD},  // v's own head dim, neither a multiple of 8
      {20, 20, 1, 267, 113, 2, 1, true, Layout::BSHD},    // the first 154 rows see no key
  });
}

}  // namespace fa_test
