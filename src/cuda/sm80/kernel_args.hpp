// Plain-data kernel arguments built on the host from the validated params.
#pragma once

#include <cmath>
#include <cstdint>

#include "common/mask.hpp"
#include "common/params.hpp"
#include "common/philox.hpp"

namespace flashattn::detail::cuda::sm80 {

constexpr float kLog2e = 1.4426950408889634f;
constexpr float kLn2 = 0.6931471805599453f;

struct Tensor4 {
  const void* ptr;
  int64_t sb, ss, sh;  // batch, seq, head strides in elements
};

inline Tensor4 make_t4(const void* p, const Strides& s) { return {p, s.batch, s.seq, s.head}; }

struct AttnArgs {
  Tensor4 q, k, v;
  int batch, seqlen_q, seqlen_k, heads_q, heads_kv, group, d;
  float scale;      // softmax scale
  float softcap;    // 0 = off
  float cap_scale;  // scale / softcap (the tanh argument per raw score)
  float mult;       // log2(e) times what the softmax exponentiates per raw score
  WindowMask mask;
  // ALiBi and dropout (variants.cuh), read only by the VAR instantiations.
  const float* alibi;  // slopes of batch entry b: alibi[b * alibi_sb + h]; nullptr = off
  int64_t alibi_sb;
  float alibi_unit;    // bias per unit of distance and of slope, in score units
  bool dropout;
  float keep_scale;    // 1 / (1 - p)
  int64_t drop_b0;     // the generator's b of batch entry 0 (AttnParams::batch_offset)
  DropoutRng rng;

  explicit AttnArgs(const AttnParams& p) : mask(p) {
    q = make_t4(p.q, p.q_str);
    k = make_t4(p.k, p.k_str);
    v = make_t4(p.v, p.v_str);
    batch = static_cast<int>(p.batch);
    seqlen_q = static_cast<int>(p.seqlen_q);
    seqlen_k = static_cast<int>(p.seqlen_k);
    heads_q = static_cast<int>(p.heads_q);
    heads_kv = static_cast<int>(p.heads_kv);
    group = static_cast<int>(p.heads_q / p.heads_kv);
    d = static_cast<int>(p.head_dim);
    scale = p.scale;
    softcap = p.softcap;
    cap_scale = p.softcap > 0 ? p.scale / p.softcap : 0.f;
    // Without softcap the exponent is scale*s*log2e, folded into one FMA with
    // the running max; with softcap the scores are first replaced by
    // cap*tanh(s*scale/cap), already in natural units.
    mult = p.softcap > 0 ? kLog2e : p.scale * kLog2e;
    alibi = p.alibi_slopes;
    alibi_sb = p.alibi_batch_stride;
    alibi_unit = p.softcap > 0 ? -1.f : -1.f / p.scale;
    dropout = p.dropout_p > 0.f;
    keep_scale = dropout ? 1.0f / (1.0f - p.dropout_p) : 1.f;
    drop_b0 = p.batch_offset;
    rng = dropout ? DropoutRng(p.dropout_seed, p.dropout_offset, p.dropout_p, p.heads_q) : DropoutRng();
  }
  bool has_variants() const { return alibi != nullptr || dropout; }
};

struct FwdArgs : AttnArgs {
  Tensor4 o;
  float* lse;  // [B, Hq, Sq] or nullptr
  int32_t* dropout_mask;  // [B, Hq, Sq, Sk] keep mask to return, or nullptr (padded batches)
  explicit FwdArgs(const FwdParams& p) : AttnArgs(p) {
    o = make_t4(p.out, p.o_str);
    lse = p.lse;
    dropout_mask = p.dropout_mask;
  }
};

struct BwdArgs : AttnArgs {
  Tensor4 o, dout, dq, dk, dv;
  const float* lse;  // [B, Hq, Sq]
  float* dsum;       // workspace: D = rowsum(dO * O), [B, Hq, Sq]
  float* dq_accum;   // workspace: fp32 dQ (unscaled), [B, Hq, Sq, Dtile]; nullptr when deterministic
  // Varlen (read by the SEQ and VAR instantiations only): sequence b owns
  // packed rows [cu_q[b], cu_q[b + 1]) of q/out/dout/dq and [cu_k[b],
  // cu_k[b + 1]) of k/v/dk/dv (batch strides 0; seqlen_q / seqlen_k are the
  // maxima). Row (b, h, i) of the LSE, D and dQ-accumulator is
  // b * row_sb + h * row_sh + cu_q[b] + i: [B, Hq, Sq] when padded (cu_q[b]
  // read as 0), [Hq, total_q] (the varlen LSE's own layout) when varlen.
  const int32_t* cu_q;
  const int32_t* cu_k;
  int64_t total_q;
  int64_t row_sb, row_sh;
  // Grid of the main kernel (kernel_traits.hpp grid_block), set by the
  // launcher for its tile: key tiles per (sequence, kv head), the
  // (sequence, kv head) units per group and the groups before the last.
  int n_blocks = 0;
  int group_units = 1;
  int full_groups = 0;  // groups of group_units before the last, which holds the rest
  int walk = 0;  // BwdWalk: the order of a block's query tiles (kernel_traits.hpp BwdSteps)
  explicit BwdArgs(const BwdParams& p) : AttnArgs(p) {
    o = make_t4(p.out, p.o_str);
    dout = make_t4(p.dout, p.do_str);
    dq = make_t4(p.dq, p.dq_str);
    dk = make_t4(p.dk, p.dk_str);
    dv = make_t4(p.dv, p.dv_str);
    lse = p.lse;
    dsum = nullptr;
    dq_accum = nullptr;
    cu_q = p.cu_seqlens_q;
    cu_k = p.cu_seqlens_k;
    total_q = p.varlen() ? p.total_q : p.batch * p.seqlen_q;
    row_sb = p.varlen() ? 0 : p.heads_q * p.seqlen_q;
    row_sh = p.varlen() ? p.total_q : p.seqlen_q;
  }
  bool varlen() const { return cu_q != nullptr; }
};

}  // namespace flashattn::detail::cuda::sm80
