// FlashAttention backward on CPU (seed lesson section 5): S and P are
// recomputed tile by tile from the saved LSE (P = exp(S - LSE)), never stored
// beyond one tile per thread. Per tile pair (query tile i, KV tile j):
//   S = (scale Q_i) K_j^T, P = exp(S - LSE_i), dP = dO_i V_j^T,
//   dS = P o (dP - D_i)  [o (1 - tanh^2) with softcap],  D = rowsum(dO o O),
//   dV_j += P^T dO_i,  dK_j += dS^T (scale Q_i),  dQ_i += dS K_j  (x scale at the end).
//
// Determinism scheme (bit-identical for any thread count, no atomic adds): a
// wavefront over tile pairs. At step t, the task of KV tile j takes query tile
// i = (j + t) mod T (T = max(#query tiles, #KV tiles)); within a step no two
// tasks share an i or a j, so the fp32 accumulators dQ_i, dK_j, dV_j each
// have one writer per step, and every accumulator receives its contributions
// in step order whatever thread runs them. Each task waits for the two
// tasks before it on its accumulators (Wavefront, below), not for a barrier.
// All five tile GEMMs are done once per pair (no recomputation pass).
//
// Memory: the accumulators and fp32 copies of the operands (Q scaled, dO, K,
// and K^T, V^T per tile so no GEMM operand is transposed per pair) live in a
// per-(batch, kv head) group buffer, O((Sq*group + Sk) * d) floats. Groups
// are processed a chunk at a time; a chunk holds enough groups to give every
// thread work at each step. The chunking does not change any group's
// arithmetic, so results stay independent of the thread count.
//
// Softcap: Q is copied pre-multiplied by scale/cap, so the GEMM gives
// u = scale q.k / cap, t = tanh(u), s = cap t and ds/d(scale q.k) = 1 - t^2;
// dK picks up the factor cap because its Q operand carries 1/cap.
#pragma once

#include <omp.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstring>
#include <memory>
#include <thread>

#include "common/mask.hpp"
#include "convert.hpp"
#include "forward.hpp"
#include "gemm.hpp"
#include "tile_mask.hpp"
#include "tiles.hpp"
#include "variants.hpp"

namespace flashattn::detail::cpu::FA_ISA_NS {

struct BwdLayout {
  int64_t dpad, tq, tk, steps, groups, chunk;
  int64_t ldr;  // row stride of the Q, dO, dQ, K, dK, dV row buffers (tile_ld(dpad))
  // Per group (float offsets from the group's base).
  size_t kt, vt, kr, dk, dv, q, dout, dq, lse, dsum, per_group;
  // Per thread.
  size_t s, dps, kpos, zr, per_thread;
};

// The wavefront's steps without a barrier between them. At step t the task
// of KV tile j adds to dK_j, dV_j and to dQ_i, i = (j + t) mod steps; a
// barrier after each step made every task wait for the slowest of the step
// before (2k causal: 4-6 busy tasks a step for 2 threads, and ~10% of the AMX
// fp32 backward's samples in the barrier's spin). The order needs less: task
// (j, t) after (j, t - 1), the one before it on dK_j and dV_j, and after the
// last earlier task on dQ_i, (j + k, t - k) for the smallest k >= 1 with
// (j + k) mod steps a KV tile. Tasks are claimed in (step, group, tile) order
// from one counter, and each waits for those two; a task waits only on tasks
// claimed before it, whose threads are running them, so the waits end. Every
// accumulator still receives its terms in step order: the same bits as the
// barrier wavefront, for any thread count.
class Wavefront {
 public:
  Wavefront(int64_t groups, int64_t tk, int64_t steps)
      : tk_(tk), steps_(steps), done_(new std::atomic<int64_t>[size_t(std::max<int64_t>(1, groups * tk))]) {}

  // Before a chunk of ng groups, by one thread, with a barrier after it.
  void reset(int64_t ng) {
    ng_ = ng;
    next_.store(0, std::memory_order_relaxed);
    for (int64_t x = 0; x < ng * tk_; ++x) done_[x].store(0, std::memory_order_relaxed);
  }

  // Every thread of the team: pair(gl, i, j) for each task, query tile i
  // (which may be past the last: steps >= tq) of KV tile j in group gl.
  template <class Pair>
  void run(Pair pair) {
    const int64_t per_step = ng_ * tk_, total = steps_ * per_step;
    for (int64_t n; (n = next_.fetch_add(1, std::memory_order_relaxed)) < total;) {
      const int64_t t = n / per_step, gl = n % per_step / tk_, j = n % tk_;
      std::atomic<int64_t>* d = done_.get() + gl * tk_;
      wait_for(d[j], t);
      for (int64_t k = 1; k <= t; ++k) {
        const int64_t jk = (j + k) % steps_;
        if (jk < tk_) {
          wait_for(d[jk], t - k + 1);
          break;
        }
      }
      pair(gl, (j + t) % steps_, j);
      d[j].store(t + 1, std::memory_order_release);
    }
  }

 private:
  static void wait_for(const std::atomic<int64_t>& a, int64_t steps_done) {
    for (int spins = 0; a.load(std::memory_order_acquire) < steps_done; ++spins) {
      if (spins < 4096) {
#if defined(__x86_64__) || defined(__i386__)
        __builtin_ia32_pause();
#endif
      } else {
        std::this_thread::yield();  // more threads than cores: let the one we wait for run
      }
    }
  }

  int64_t tk_, steps_, ng_ = 0;
  std::atomic<int64_t> next_{0};
  std::unique_ptr<std::atomic<int64_t>[]> done_;  // per (group, KV tile): its steps finished
};

inline BwdLayout bwd_layout(const BwdParams& p, int nthreads) {
  BwdLayout L;
  const int64_t d = p.head_dim, g = p.group();
  L.dpad = round_up(d, VW);
  L.tq = (p.seqlen_q + BR - 1) / BR;
  L.tk = (p.seqlen_k + BC - 1) / BC;
  L.steps = std::max(L.tq, L.tk);
  L.groups = p.batch * p.heads_kv;
  // Enough groups per chunk for ~8 tasks per thread and step.
  const int64_t want = L.tk > 0 ? (8 * int64_t(nthreads) + L.tk - 1) / L.tk : 1;
  L.chunk = std::max<int64_t>(1, std::min(L.groups, want));
  L.ldr = tile_ld(L.dpad);
  Carver c;
  L.kt = c.take(L.tk * d * BLD);    // K^T per tile: d x BC, rows BLD apart, zero padded past the tile end
  L.vt = c.take(L.tk * d * BLD);    // V^T per tile
  L.kr = c.take(p.seqlen_k * L.ldr);  // K rows, zero padded to dpad, ldr apart
  L.dk = c.take(p.seqlen_k * L.ldr);
  L.dv = c.take(p.seqlen_k * L.ldr);
  L.q = c.take(g * p.seqlen_q * L.ldr);     // (scale [/cap]) Q rows
  L.dout = c.take(g * p.seqlen_q * L.ldr);  // dO rows
  L.dq = c.take(g * p.seqlen_q * L.ldr);
  L.lse = c.take(g * p.seqlen_q);   // LSE with -inf turned into +inf
  L.dsum = c.take(g * p.seqlen_q);  // D = rowsum(dO o O)
  L.per_group = c.floats;
  Carver t;
  L.s = t.take(BR * BLD);    // S then P: BR x BC, rows BLD apart
  L.dps = t.take(BR * BLD);  // dP then dS
  L.kpos = t.take(BC);  // ALiBi: key positions of the tile as floats
  L.zr = t.take(BC);    // dropout: Z / (1 - p) of one row's keys
  L.per_thread = t.floats;
  return L;
}

// Varlen: the largest any one sequence needs (max_over_sequences).
inline size_t backward_workspace_floats(const BwdParams& p, int nthreads) {
  if (p.varlen()) {
    return max_over_sequences(p, [&](const BwdParams& s) { return backward_workspace_floats(s, nthreads); });
  }
  BwdLayout L = bwd_layout(p, nthreads);
  return size_t(L.chunk) * L.per_group + size_t(nthreads) * L.per_thread;
}

inline int64_t backward_tasks(const BwdParams& p) {
  if (p.varlen()) return max_over_sequences(p, [](const BwdParams& s) { return backward_tasks(s); });
  int64_t a = p.batch * p.heads_kv * ((p.seqlen_k + BC - 1) / BC);
  int64_t b = p.batch * p.heads_q * ((p.seqlen_q + BR - 1) / BR);
  return std::max(a, b);
}

// LSE as the backward uses it: -inf (a row without keys) becomes +inf, so
// exp(s - lse) is 0 instead of exp(-inf + inf) = NaN.
inline float lse_for_bwd(float x) { return x == kNegInf ? kInf : x; }

// P and dS for one vector of scores: acc holds scale*q.k (divided by cap when
// capped, -inf when masked). Returns P; dp becomes dS.
// P = exp(s - LSE) <= 1 exactly; the recomputed s can exceed the forward's
// LSE by rounding, and with logits ~1e6 by enough that exp overflows and dS
// turns into inf/NaN (found by the C ABI fuzzer): clamp the exponent at 0.
inline vf p_and_ds(vf acc, vf lse, vf dsum, vf& dp, bool capped, float cap) {
  const vf zero = vsplat(0.0f);
  if (capped) {
    vf t = vtanh(acc);
    vf sv = vsel(acc == vsplat(kNegInf), vsplat(kNegInf), vsplat(cap) * t);
    vf pv = vexp(vmin(zero, sv - lse));  // (zero first: NaN passes)
    dp = pv * (dp - dsum) * (vsplat(1.0f) - t * t);
    return pv;
  }
  vf pv = vexp(vmin(zero, acc - lse));
  dp = pv * (dp - dsum);
  return pv;
}

// p_and_ds with ALiBi and dropout: the bias joins the score after the cap;
// zr = Z / (1 - p) scales dP~ = dO V^T into dP (so dS = P o (dP - D), D
// unchanged: rowsum(P o dP) = rowsum(dO o O)) and P into the P~ that dV
// takes. Returns P~; dp becomes dS.
inline vf p_and_ds_variants(vf acc, vf bias, vf zr, vf lse, vf dsum, vf& dp, bool capped,
                            float cap) {
  const vf zero = vsplat(0.0f);
  vf sv = acc, tang = vsplat(1.0f);
  if (capped) {
    vf t = vtanh(acc);
    sv = vsel(acc == vsplat(kNegInf), vsplat(kNegInf), vsplat(cap) * t);
    tang = vsplat(1.0f) - t * t;
  }
  vf pv = vexp(vmin(zero, sv + bias - lse));
  dp = pv * (dp * zr - dsum) * tang;
  return pv * zr;
}

// Group prologue, KV side: K rows, K^T and V^T of KV tile j; zero dK, dV.
template <class T>
void bwd_load_kv(const BwdParams& p, const BwdLayout& L, float* G, int64_t b, int64_t hk,
                 int64_t j) {
  const int64_t d = p.head_dim, dp = L.dpad, ldr = L.ldr;
  const int64_t c0 = j * BC, nk = std::min(BC, p.seqlen_k - c0), nkc = round_up(nk, VW);
  float *kt = G + L.kt + j * d * BLD, *vt = G + L.vt + j * d * BLD;
  auto K = rows_of<const T>(p.k, p.k_str, b, hk);
  auto V = rows_of<const T>(p.v, p.v_str, b, hk);
  float* vrow = G + L.dv + c0 * ldr;  // dV rows as scratch before zeroing them
  for (int64_t jj = 0; jj < nk; ++jj) {
    float* kr = G + L.kr + (c0 + jj) * ldr;
    load_row(K.row(c0 + jj), kr, d, 1.0f);
    for (int64_t k = d; k < dp; ++k) kr[k] = 0.0f;
    load_row(V.row(c0 + jj), vrow, d, 1.0f);
    for (int64_t k = 0; k < d; ++k) { kt[k * BLD + jj] = kr[k]; vt[k * BLD + jj] = vrow[k]; }
  }
  for (int64_t k = 0; k < d; ++k)
    for (int64_t jj = nk; jj < nkc; ++jj) kt[k * BLD + jj] = vt[k * BLD + jj] = 0.0f;
  std::memset(G + L.dk + c0 * ldr, 0, sizeof(float) * size_t(nk * ldr));
  std::memset(G + L.dv + c0 * ldr, 0, sizeof(float) * size_t(nk * ldr));
}

// Group prologue, query side: row i of query head hl of the group.
template <class T>
void bwd_load_q(const BwdParams& p, const BwdLayout& L, float* G, int64_t b, int64_t hk,
                int64_t hl, int64_t i) {
  const int64_t d = p.head_dim, dp = L.dpad, h = hk * p.group() + hl;
  const float qscale = q_factor(p.scale, p.softcap);
  const int64_t r = hl * p.seqlen_q + i;
  float *q = G + L.q + r * L.ldr, *dout = G + L.dout + r * L.ldr, *dq = G + L.dq + r * L.ldr;
  load_row(rows_of<const T>(p.q, p.q_str, b, h).row(i), q, d, qscale);
  load_row(rows_of<const T>(p.dout, p.do_str, b, h).row(i), dout, d, 1.0f);
  load_row(rows_of<const T>(p.out, p.o_str, b, h).row(i), dq, d, 1.0f);  // O, briefly
  float acc = 0.0f;
  for (int64_t k = 0; k < d; ++k) acc += dout[k] * dq[k];
  G[L.dsum + r] = acc;
  G[L.lse + r] = lse_for_bwd(p.lse[b * p.lse_batch_stride + h * p.lse_head_stride + i]);
  for (int64_t k = d; k < dp; ++k) q[k] = dout[k] = 0.0f;
  std::memset(dq, 0, sizeof(float) * size_t(dp));
}

// P and dS of a tile pair in place, rows [r0, r0 + nq) x keys [c0, c0 + nk)
// (ncols = nk rounded up to the vector width): s (scores, masked) becomes P,
// dps (dP) becomes dS, with ALiBi and dropout when the problem has them
// (kpos: the key positions, zr: a row of keep factors, both workspace); rows
// of s and dps are ld floats apart.
// Shared by the fp32 backward and the bf16 one (backward_amx.hpp).
inline void p_and_ds_rows(const BwdParams& p, int64_t b, int64_t head, int64_t r0, int64_t nq,
                          int64_t c0, int64_t nk, int64_t ncols, const float* lse,
                          const float* dsum, const float* kpos, float* zr, float* s, float* dps,
                          int64_t ld) {
  const bool capped = p.softcap > 0.0f;
  const float cap = p.softcap;
  if (p.has_variants()) {
    const Variants var(p, b, head);
    for (int64_t jj = 0; jj < ncols; ++jj) zr[jj] = 1.0f;
    for (int64_t ii = 0; ii < nq; ++ii) {
      const vf li = vsplat(lse[ii]), di = vsplat(dsum[ii]);
      if (var.dropout) var.keep_row(r0 + ii, c0, nk, zr);
      for (int64_t jj = 0; jj < ncols; jj += VW) {
        const vf bias = var.alibi ? var.bias(r0 + ii, vload(kpos + jj)) : vsplat(0.0f);
        vf dpv = vload(dps + ii * ld + jj);
        vstore(s + ii * ld + jj, p_and_ds_variants(vload(s + ii * ld + jj), bias, vload(zr + jj),
                                                   li, di, dpv, capped, cap));
        vstore(dps + ii * ld + jj, dpv);
      }
    }
    return;
  }
  for (int64_t ii = 0; ii < nq; ++ii) {
    const vf li = vsplat(lse[ii]), di = vsplat(dsum[ii]);
    for (int64_t jj = 0; jj < ncols; jj += VW) {
      vf dpv = vload(dps + ii * ld + jj);
      vstore(s + ii * ld + jj, p_and_ds(vload(s + ii * ld + jj), li, di, dpv, capped, cap));
      vstore(dps + ii * ld + jj, dpv);
    }
  }
}

// Query rows per block of a partly visible tile pair (bwd_pair).
constexpr int64_t kBwdSubRows = 32;

// One tile pair (query tile i, KV tile j) for every query head of the group.
inline void bwd_pair(const BwdParams& p, const WindowMask& mask, const BwdLayout& L, float* G,
                     float* W, int64_t i, int64_t j, int64_t b, int64_t hk) {
  const int64_t d = p.head_dim, dp = L.dpad, ldr = L.ldr, g = p.group();
  const int64_t r0 = i * BR, nq = std::min(BR, p.seqlen_q - r0);
  const int64_t c0 = j * BC, nk = std::min(BC, p.seqlen_k - c0), nkc = round_up(nk, VW);
  const KeyRange kr = mask.keys(r0, r0 + nq);
  if (kr.empty() || kr.end <= c0 || kr.begin >= c0 + nk) return;
  const bool full = mask.tile_full(r0, r0 + nq, c0, c0 + nk);

  const float *kt = G + L.kt + j * d * BLD, *vt = G + L.vt + j * d * BLD;
  const float* krows = G + L.kr + c0 * ldr;
  float *dk = G + L.dk + c0 * ldr, *dv = G + L.dv + c0 * ldr;
  float *s = W + L.s, *dps = W + L.dps;
  if (p.has_variants()) key_positions(W + L.kpos, c0, nk);
  // A partly visible tile runs in blocks of kBwdSubRows query rows, each over
  // only the whole vectors of keys that one of its rows sees: on a causal
  // diagonal half of a 128 x 128 tile sees nothing. Every dV / dK / dQ
  // element still sums its products in row (or key) order, and what is left
  // out is P = dS = 0.
  const int64_t sub = full ? nq : kBwdSubRows;
  for (int64_t hl = 0; hl < g; ++hl) {
    const int64_t r = hl * p.seqlen_q + r0;
    for (int64_t a = 0; a < nq; a += sub) {
      const int64_t na = std::min(sub, nq - a);
      int64_t k0 = 0, k1 = nkc;  // columns of the tile, whole vectors
      if (!full) {
        const KeyRange ka = mask.keys(r0 + a, r0 + a + na);
        k0 = std::clamp<int64_t>(ka.begin - c0, 0, nk) / VW * VW;
        k1 = round_up(std::clamp<int64_t>(ka.end - c0, 0, nk), VW);
        if (ka.empty() || k0 >= k1) continue;
      }
      const int64_t nka = std::min(k1, nk) - k0;  // keys of the block
      const float *q = G + L.q + (r + a) * ldr, *dout = G + L.dout + (r + a) * ldr;
      const float *lse = G + L.lse + r + a, *dsum = G + L.dsum + r + a;
      float* dq = G + L.dq + (r + a) * ldr;
      float *sa = s + a * BLD + k0, *dpa = dps + a * BLD + k0;
      constexpr bool kPf = true;  // operand blocks prefetched (gemm_block)
      gemm<false, false, float, kPf>(na, k1 - k0, d, q, ldr, 1, kt + k0, BLD, sa, BLD);       // S = (scale Q) K^T
      gemm<false, false, float, kPf>(na, k1 - k0, d, dout, ldr, 1, vt + k0, BLD, dpa, BLD);  // dP = dO V^T
      if (!full) mask_rows(sa, BLD, mask, r0 + a, na, c0 + k0, nka);
      p_and_ds_rows(p, b, hk * g + hl, r0 + a, na, c0 + k0, nka, k1 - k0, lse, dsum, W + L.kpos + k0,
                    W + L.zr, sa, dpa, BLD);
      gemm<true, false, float, kPf>(nka, dp, na, sa, 1, BLD, dout, ldr, dv + k0 * ldr, ldr);     // dV += P^T dO
      gemm<true, false, float, kPf>(nka, dp, na, dpa, 1, BLD, q, ldr, dk + k0 * ldr, ldr);       // dK += dS^T (scale Q)
      gemm<true, false, float, kPf>(na, dp, nka, dpa, BLD, 1, krows + k0 * ldr, ldr, dq, ldr);  // dQ += dS K
    }
  }
}

template <class T>
void backward_t(const BwdParams& p, float* ws, int nthreads) {
  const WindowMask mask(p);
  const BwdLayout L = bwd_layout(p, nthreads);
  const int64_t g = p.group(), d = p.head_dim, ldr = L.ldr;
  const float kfac = p.softcap > 0.0f ? p.softcap : 1.0f;
  float* const wbase = ws + size_t(L.chunk) * L.per_group;
  Wavefront wf(L.chunk, L.tk, L.steps);
#pragma omp parallel num_threads(nthreads)
  {
    float* W = wbase + size_t(omp_get_thread_num()) * L.per_thread;
    for (int64_t g0 = 0; g0 < L.groups; g0 += L.chunk) {
      const int64_t ng = std::min(L.chunk, L.groups - g0);
      auto group_base = [&](int64_t gl) { return ws + size_t(gl) * L.per_group; };
#pragma omp single nowait
      wf.reset(ng);  // (the barriers of the prologue's loops below come before run)
#pragma omp for schedule(dynamic, 1) nowait
      for (int64_t x = 0; x < ng * L.tk; ++x) {
        const int64_t gg = g0 + x / L.tk;
        bwd_load_kv<T>(p, L, group_base(x / L.tk), gg / p.heads_kv, gg % p.heads_kv, x % L.tk);
      }
      const int64_t qrows = g * p.seqlen_q;
#pragma omp for schedule(static)
      for (int64_t x = 0; x < ng * qrows; ++x) {
        const int64_t gg = g0 + x / qrows, rr = x % qrows;
        bwd_load_q<T>(p, L, group_base(x / qrows), gg / p.heads_kv, gg % p.heads_kv,
                      rr / p.seqlen_q, rr % p.seqlen_q);
      }
      wf.run([&](int64_t gl, int64_t i, int64_t j) {
        const int64_t gg = g0 + gl;
        if (i < L.tq) bwd_pair(p, mask, L, group_base(gl), W, i, j, gg / p.heads_kv, gg % p.heads_kv);
      });
#pragma omp barrier
#pragma omp for schedule(static) nowait
      for (int64_t x = 0; x < ng * p.seqlen_k; ++x) {
        const int64_t gg = g0 + x / p.seqlen_k, jj = x % p.seqlen_k;
        const int64_t b = gg / p.heads_kv, hk = gg % p.heads_kv;
        const float* G = group_base(x / p.seqlen_k);
        store_row(G + L.dk + jj * ldr, rows_of<T>(p.dk, p.dk_str, b, hk).row(jj), d, kfac);
        store_row(G + L.dv + jj * ldr, rows_of<T>(p.dv, p.dv_str, b, hk).row(jj), d, 1.0f);
      }
#pragma omp for schedule(static)
      for (int64_t x = 0; x < ng * qrows; ++x) {
        const int64_t gg = g0 + x / qrows, rr = x % qrows;
        const int64_t b = gg / p.heads_kv, h = (gg % p.heads_kv) * g + rr / p.seqlen_q;
        const float* G = group_base(x / qrows);
        store_row(G + L.dq + rr * ldr, rows_of<T>(p.dq, p.dq_str, b, h).row(rr % p.seqlen_q), d,
                  p.scale);
      }
    }
  }
}

// A sequence with no queries still writes its (zero) dK, dV and one with no
// keys its (zero) dQ: backward_t does both through its empty loops.
template <class T>
void backward_varlen(const BwdParams& p, float* ws, int nthreads) {
  if (!p.varlen()) return backward_t<T>(p, ws, nthreads);
  for_each_sequence(p, [&](const BwdParams& sp) { backward_t<T>(sp, ws, nthreads); });
}

inline void backward(const BwdParams& p, float* ws, int nthreads) {
  switch (p.dtype) {
    case DType::F32: backward_varlen<float>(p, ws, nthreads); break;
    case DType::F16: backward_varlen<f16_t>(p, ws, nthreads); break;
    case DType::BF16: backward_varlen<bf16_t>(p, ws, nthreads); break;
    default: break;
  }
}

}  // namespace flashattn::detail::cpu::FA_ISA_NS
