// Calls whose head dims the kernels do not take as they are:
//  - v with a head dim of its own (q, k: D; v, out, dout, dv: Dv;
//    DeepSeek-style 192 / 128) on kernels that take one head dim (all but the
//    Hopper forward and backward, which bound each TMA map by its operand's);
//  - a head dim that is not a whole number of the kernels' unit (unit()
//    below: 8, or 16 for fp8 e4m3), e.g. 100 or 36: the kernels load whole
//    16-byte chunks of a row (fp8: 32-byte wgmma K steps).
//
// The tensors are copied into zero-padded contiguous workspace tensors of
// width P = max(D, Dv) rounded up to the unit, the backend runs at P, and the
// padded outputs' first columns are copied back. Zeros change nothing: extra
// q / k columns add 0 to every score, extra v columns give O (and dO) columns
// of 0, which add 0 to dP = dO V^T and to D = rowsum(dO o O), and the padded
// dV / dQ / dK columns are dropped. The scale was resolved from D before
// (src/api), so it does not follow P. Cost: O(N * P) workspace and one pass
// of copies per tensor; the kernels do the work of head dim P on both sides.
//
// The backend supplies Ops (its memory and copy primitives; the copies run in
// the order given, on the call's stream for CUDA):
//   Status check(const Rows& t, size_t elem_bytes);  // every tensor copied, before the first copy
//   Status alloc(size_t bytes, void** base);  // lives until Ops is destroyed
//   Status pad(const Rows& src, void* dst, int64_t width, size_t elem_bytes);
//   Status crop(const void* src, int64_t width, const Rows& dst, size_t elem_bytes);
// pad writes dst as contiguous [n0, n1, heads, width] rows (src's columns,
// then zeros); crop writes src's first dst.cols columns of each row into dst.
// Nothing of the caller's is written unless the backend call succeeded.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <vector>

#include "common/params.hpp"

namespace flashattn::detail::head_dim_pad {

// A strided [n0, n1, heads, cols] tensor: element (a, s, h, c) at element
// offset a * str.batch + s * str.seq + h * str.head + c from ptr.
struct Rows {
  const char* name = "";  // the argument, for error messages
  void* ptr = nullptr;
  Strides str;
  int64_t n0 = 0, n1 = 0, heads = 0, cols = 0;
  int64_t count() const { return n0 * n1 * heads; }
};

// The head-dim unit of the kernels for inputs of dtype dt: 16-byte rows of
// 16-bit and fp32 data take multiples of 8 (fp32: the CUDA f32 and CPU
// kernels tile by 8 columns too); fp8's 8-bit wgmma operands need 16.
inline int64_t unit(DType dt) { return dt == DType::F8E4M3 ? 16 : 8; }
// Whether both head dims are whole units (the kernels take them as they are).
inline bool aligned(const AttnParams& p) {
  const int64_t u = unit(p.dtype);
  return p.head_dim % u == 0 && p.dim_v() % u == 0;
}
inline bool needed(const AttnParams& p) { return p.dim_v() != p.head_dim || !aligned(p); }
inline int64_t width(const AttnParams& p) {
  const int64_t u = unit(p.dtype);
  return (std::max(p.head_dim, p.dim_v()) + u - 1) / u * u;
}

namespace impl {

// Element bytes (flashattn::dtype_size lives in src/api, which the CUDA
// objects' standalone tools do not link).
inline size_t elem_bytes(DType dt) {
  return dt == DType::F32 || dt == DType::I32 ? 4 : dt == DType::F8E4M3 ? 1 : 2;
}

struct Copy {
  Rows user;        // the caller's tensor
  void* ws;         // its padded copy
  size_t es;        // element bytes
};

// Hands out 256-byte aligned pieces of one workspace; with a null base it
// only counts (the workspace-size queries), and the pieces are null.
class Carver {
 public:
  explicit Carver(void* base) : base_(static_cast<char*>(base)) {}
  void* take(size_t bytes) {
    void* r = base_ ? base_ + used_ : nullptr;
    used_ += (bytes + 255) / 256 * 256;
    return r;
  }
  size_t used() const { return used_; }

 private:
  char* base_;
  size_t used_ = 0;
};

// Rows of the query side (q, out, dout, dq) and key side (k, v, dk, dv):
// varlen tensors are one packed entry of total rows (batch stride 0).
inline void extent(const AttnParams& p, bool query_side, int64_t* n0, int64_t* n1) {
  *n0 = p.varlen() ? 1 : p.batch;
  *n1 = p.varlen() ? (query_side ? p.total_q : p.total_k) : (query_side ? p.seqlen_q : p.seqlen_k);
}

// Swaps one tensor of the params for a padded workspace copy; records the
// copy in (input) or out of (output) the workspace.
class Planner {
 public:
  Planner(const AttnParams& p, void* base) : p_(p), carve_(base), P_(width(p)) {}

  template <class Ptr>
  void swap(const char* name, Ptr* ptr, Strides* str, bool query_side, int64_t heads, int64_t cols, DType dt,
            bool input) {
    Rows r;
    r.name = name;
    r.ptr = const_cast<void*>(static_cast<const void*>(*ptr));
    r.str = *str;
    extent(p_, query_side, &r.n0, &r.n1);
    r.heads = heads;
    r.cols = cols;
    const size_t es = elem_bytes(dt);
    void* ws = carve_.take(size_t(r.count() * P_) * es);
    (input ? pads : crops).push_back({r, ws, es});
    *ptr = static_cast<Ptr>(ws);
    *str = {p_.varlen() ? 0 : r.n1 * heads * P_, heads * P_, P_};
  }
  size_t bytes() const { return carve_.used(); }

  std::vector<Copy> pads, crops;

 private:
  const AttnParams& p_;
  Carver carve_;
  int64_t P_;
};

inline void plan(const FwdParams& p, Planner& pl, FwdParams* w) {
  *w = p;
  w->head_dim = w->head_dim_v = width(p);
  if (p.head_dim < w->head_dim) {
    pl.swap("q", &w->q, &w->q_str, true, p.heads_q, p.head_dim, p.dtype, true);
    pl.swap("k", &w->k, &w->k_str, false, p.heads_kv, p.head_dim, p.dtype, true);
  }
  if (p.dim_v() < w->head_dim) {
    pl.swap("v", &w->v, &w->v_str, false, p.heads_kv, p.dim_v(), p.dtype, true);
    pl.swap("out", &w->out, &w->o_str, true, p.heads_q, p.dim_v(), out_dtype_for(p.dtype), false);
  }
}

inline void plan(const BwdParams& p, Planner& pl, BwdParams* w) {
  *w = p;
  w->head_dim = w->head_dim_v = width(p);
  if (p.head_dim < w->head_dim) {
    pl.swap("q", &w->q, &w->q_str, true, p.heads_q, p.head_dim, p.dtype, true);
    pl.swap("k", &w->k, &w->k_str, false, p.heads_kv, p.head_dim, p.dtype, true);
    pl.swap("dq", &w->dq, &w->dq_str, true, p.heads_q, p.head_dim, p.dtype, false);
    pl.swap("dk", &w->dk, &w->dk_str, false, p.heads_kv, p.head_dim, p.dtype, false);
  }
  if (p.dim_v() < w->head_dim) {
    pl.swap("v", &w->v, &w->v_str, false, p.heads_kv, p.dim_v(), p.dtype, true);
    pl.swap("out", &w->out, &w->o_str, true, p.heads_q, p.dim_v(), p.dtype, true);
    pl.swap("dout", &w->dout, &w->do_str, true, p.heads_q, p.dim_v(), p.dtype, true);
    pl.swap("dv", &w->dv, &w->dv_str, false, p.heads_kv, p.dim_v(), p.dtype, false);
  }
}

}  // namespace impl

// The params the backend sees (one head dim; padded tensors at null
// addresses) and the workspace the padding takes: for workspace-size queries.
template <class Params>
Params padded_shape(const Params& p, size_t* bytes) {
  impl::Planner pl(p, nullptr);
  Params w;
  impl::plan(p, pl, &w);
  *bytes = pl.bytes();
  return w;
}

// run(params with one head dim) on padded copies, then the outputs cropped.
template <class Params, class Ops, class Run>
Status call(const Params& p, Ops& ops, Run run) {
  size_t bytes = 0;
  padded_shape(p, &bytes);
  void* base = nullptr;
  if (Status s = ops.alloc(bytes, &base); !s.ok()) return s;
  impl::Planner pl(p, base);
  Params w;
  impl::plan(p, pl, &w);
  // Every tensor checked before the first copy: an error leaves the caller's
  // memory as it was (the workspace goes with ops).
  for (const auto* list : {&pl.pads, &pl.crops}) {
    for (const impl::Copy& c : *list) {
      if (Status s = ops.check(c.user, c.es); !s.ok()) return s;
    }
  }
  const int64_t P = width(p);
  for (const impl::Copy& c : pl.pads) {
    if (Status s = ops.pad(c.user, c.ws, P, c.es); !s.ok()) return s;
  }
  if (Status s = run(w); !s.ok()) return s;
  for (const impl::Copy& c : pl.crops) {
    if (Status s = ops.crop(c.ws, P, c.user, c.es); !s.ok()) return s;
  }
  return Status::Ok();
}

}  // namespace flashattn::detail::head_dim_pad
