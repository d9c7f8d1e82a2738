// Ring attention over a Transport: forward and backward. See
// include/flashattn/ring.hpp for the algorithm; the per-step pairs of the
// zig-zag layout (rank r holds chunks r and 2P-1-r of 2P):
//   own K/V (step 0):   all local queries x all local keys, causal (the
//                       concatenation of two chunks against the same two is
//                       exactly the global causal mask, bottom-right aligned)
//   source s < r:       all local queries x key chunk s (first half), full
//   source s > r:       query chunk 2P-1-r (second half) x all keys, full
// so every step is one library call, and every rank does the same work.
#include <limits>
#include <string>
#include <utility>

#include "flashattn/ring.hpp"
#include "ring/host_tensor.hpp"
#include "ring/ring_ops.hpp"

namespace flashattn::ring {

std::vector<int64_t> zigzag_chunk_sizes(int64_t total, int world) {
  std::vector<int64_t> sizes;
  if (world < 1 || total < 0) return sizes;
  const int64_t n = 2 * int64_t(world), base = total / n, extra = total % n;
  for (int64_t i = 0; i < n; ++i) sizes.push_back(base + (i < extra ? 1 : 0));
  return sizes;
}

namespace {

using detail::Buf;
using detail::Ops;
using detail::slice;

#define FA_RING_TRY(expr)                 \
  do {                                    \
    Status fa_ring_st_ = (expr);          \
    if (!fa_ring_st_.ok()) return fa_ring_st_; \
  } while (0)

// K/V and dK/dV move between the same two ranks at the same time.
constexpr int kTagKV = 0;
constexpr int kTagDKV = 1;

Status invalid(std::string msg) { return Status::Error(ErrorCode::InvalidArgument, std::move(msg)); }

struct Ring {
  int rank = 0, world = 1;
  bool causal = false;
  std::vector<int64_t> sk;      // every rank's local K/V length
  std::vector<int64_t> chunks;  // causal: the 2P zig-zag chunk sizes
  int src(int step) const { return (rank - step % world + world) % world; }
};

struct Pair {
  int64_t row0 = 0, rows = 0, key0 = 0, keys = 0;
  bool causal = false;
  bool empty() const { return rows == 0 || keys == 0; }
};

Pair pair_for(const Ring& r, int src, int64_t sq) {
  const int64_t sk = r.sk[size_t(src)];
  if (!r.causal) return {0, sq, 0, sk, false};
  if (src == r.rank) return {0, sq, 0, sk, true};
  if (src < r.rank) return {0, sq, 0, r.chunks[size_t(src)], false};
  const int64_t first = r.chunks[size_t(r.rank)];
  return {first, sq - first, 0, sk, false};
}

// The ring's own conditions; the tensors' shapes, dtypes and overlaps are
// checked by the library's workspace query on the whole local problem.
Status check_ring(const TensorView& q, const TensorView& k, const TensorView& v,
                  const std::vector<int64_t>& seqlens_k, const Options& o, const Transport& t, Ring* ring) {
  // The ring's K/V chunks and partial outputs have one head dim.
  if (v.shape[3] != q.shape[3]) {
    return Status::Error(ErrorCode::Unsupported,
                         "v: the ring needs v's head_dim equal to q's (" + std::to_string(q.shape[3]) +
                             "), got " + std::to_string(v.shape[3]));
  }
  if (q.device != t.device()) {
    return invalid(std::string("transport: moves ") + (t.device() == Device::CPU ? "host" : "CUDA") +
                   " memory but the tensors are on " + (q.device == Device::CPU ? "the CPU" : "CUDA") +
                   " (make_local_ring is for CPU tensors, make_nccl_transport for CUDA)");
  }
#if !defined(FLASHATTN_WITH_CUDA)
  if (q.device == Device::CUDA) {
    return Status::Error(ErrorCode::Unsupported, "q: this build of flashattn has no CUDA backend");
  }
#endif
  // fp8 chunks would pass through the ring's dtype conversions (fp32 / fp16
  // / bf16 only) and its partial outputs are in q's dtype: refused.
  if (q.dtype == DType::F8E4M3) {
    return Status::Error(ErrorCode::Unsupported,
                         "q: float8_e4m3 inputs are supported by forward() only, not by the ring");
  }
  if (o.window_left != -1 || o.window_right != -1 || o.softcap != 0.0f) {
    return Status::Error(ErrorCode::Unsupported,
                         "options: the ring supports softmax_scale and causal only (window and "
                         "softcap must be off)");
  }
  // Each ring step sees a chunk of the keys: ALiBi distances and dropout key
  // indices would be chunk-local, i.e. silently wrong.
  if (o.alibi_slopes.data != nullptr || o.dropout_p != 0.0f) {
    return Status::Error(ErrorCode::Unsupported,
                         std::string(o.alibi_slopes.data ? "options.alibi_slopes" : "options.dropout_p") +
                             ": not supported by the ring (chunk-local key positions)");
  }
  ring->rank = t.rank();
  ring->world = t.world_size();
  ring->causal = o.causal;
  if (ring->world < 1 || ring->rank < 0 || ring->rank >= ring->world) {
    return invalid("transport: rank " + std::to_string(ring->rank) + " of " +
                   std::to_string(ring->world));
  }
  if (seqlens_k.size() != size_t(ring->world)) {
    return invalid("seqlens_k: expected one length per rank (" + std::to_string(ring->world) +
                   "), got " + std::to_string(seqlens_k.size()));
  }
  int64_t total = 0;
  for (int64_t s : seqlens_k) {
    if (s < 0) return invalid("seqlens_k: lengths must be >= 0");
    total += s;
  }
  if (seqlens_k[size_t(ring->rank)] != k.shape[1]) {
    return invalid("seqlens_k: entry " + std::to_string(ring->rank) + " is " +
                   std::to_string(seqlens_k[size_t(ring->rank)]) + " but this rank's k has " +
                   std::to_string(k.shape[1]) + " keys");
  }
  ring->sk = seqlens_k;
  if (o.causal) {
    if (q.shape[1] != k.shape[1]) {
      return invalid("q: causal ring attention is self-attention: expected as many queries as "
                     "keys (" + std::to_string(k.shape[1]) + "), got " + std::to_string(q.shape[1]));
    }
    ring->chunks = zigzag_chunk_sizes(total, ring->world);
    for (int r = 0; r < ring->world; ++r) {
      const int64_t want = ring->chunks[size_t(r)] + ring->chunks[size_t(2 * ring->world - 1 - r)];
      if (seqlens_k[size_t(r)] != want) {
        return invalid("seqlens_k: causal ring attention expects the zig-zag layout of " +
                       std::to_string(total) + " tokens: rank " + std::to_string(r) + " holds " +
                       std::to_string(want) + ", got " + std::to_string(seqlens_k[size_t(r)]));
      }
    }
  }
  return Status::Ok();
}

Options pair_options(const Options& o, bool causal) {
  Options p = o;
  p.causal = causal;
  return p;
}

// K and V of one rank, packed in one buffer: one message per step.
struct KV {
  Buf buf;
  int64_t B = 0, S = 0, H = 0, D = 0;
  TensorView k() const { return buf.view({B, S, H, D}); }
  TensorView v() const { return buf.view({B, S, H, D}, B * S * H * D); }
};

Status make_kv(Ops& ops, DType dt, int64_t b, int64_t s, int64_t h, int64_t d, KV* kv) {
  kv->B = b;
  kv->S = s;
  kv->H = h;
  kv->D = d;
  return ops.alloc(dt, 2 * b * s * h * d, &kv->buf);
}

std::unique_ptr<Ops> make_ops(const TensorView& q, void* stream) {
#if defined(FLASHATTN_WITH_CUDA)
  if (q.device == Device::CUDA) return detail::make_cuda_ops(q.device_index, stream);
#else
  (void)stream;
#endif
  (void)q;
  return detail::make_host_ops();
}

// Waits for an exchange and keeps the first error.
void finish(std::unique_ptr<Pending>& p, Status* st) {
  if (!p) return;
  Status w = p->wait();
  p.reset();
  if (st->ok() && !w.ok()) *st = std::move(w);
}

}  // namespace

Status ring_forward(const RingForwardArgs& a, Transport& transport) noexcept {
  try {
    ForwardArgs whole;
    whole.q = a.q;
    whole.k = a.k;
    whole.v = a.v;
    whole.out = a.out;
    whole.lse = a.lse;
    whole.options = pair_options(a.options, false);
    size_t ws = 0;
    FA_RING_TRY(forward_workspace_bytes(whole, &ws));
    Ring ring;
    FA_RING_TRY(check_ring(a.q, a.k, a.v, a.seqlens_k, a.options, transport, &ring));

    std::unique_ptr<Ops> ops = make_ops(a.q, a.options.stream);
    const DType dt = a.q.dtype;
    const int64_t B = a.q.shape[0], Sq = a.q.shape[1], Hq = a.q.shape[2], D = a.q.shape[3];
    const int64_t Hkv = a.k.shape[2];
    Buf out_acc, lse_acc;
    FA_RING_TRY(ops->alloc(DType::F32, B * Sq * Hq * D, &out_acc));
    FA_RING_TRY(ops->alloc(DType::F32, B * Hq * Sq, &lse_acc));
    const TensorView out_v = out_acc.view({B, Sq, Hq, D}), lse_v = lse_acc.view({B, Hq, Sq});
    FA_RING_TRY(ops->fill(out_v, 0.0f));
    FA_RING_TRY(ops->fill(lse_v, -std::numeric_limits<float>::infinity()));
    KV kv;
    FA_RING_TRY(make_kv(*ops, dt, B, a.k.shape[1], Hkv, D, &kv));
    FA_RING_TRY(ops->copy(a.k, kv.k()));
    FA_RING_TRY(ops->copy(a.v, kv.v()));

    Status st;
    for (int t = 0; t < ring.world && st.ok(); ++t) {
      const int src = ring.src(t);
      std::unique_ptr<Pending> pending;
      KV next;
      if (t + 1 < ring.world) {  // the next chunk travels while this one is computed
        st = make_kv(*ops, dt, B, ring.sk[size_t(ring.src(t + 1))], Hkv, D, &next);
        if (st.ok()) {
          st = transport.start_exchange(kv.buf.data(), kv.buf.bytes(), next.buf.data(),
                                        next.buf.bytes(), kTagKV, &pending);
        }
        if (!st.ok()) break;
      }
      const Pair p = pair_for(ring, src, Sq);
      if (!p.empty()) {
        Buf po, pl;
        st = ops->alloc(dt, B * p.rows * Hq * D, &po);
        if (st.ok()) st = ops->alloc(DType::F32, B * Hq * p.rows, &pl);
        if (st.ok()) {
          ForwardArgs fa;
          fa.q = slice(a.q, 1, p.row0, p.rows);
          fa.k = slice(kv.k(), 1, p.key0, p.keys);
          fa.v = slice(kv.v(), 1, p.key0, p.keys);
          fa.out = po.view({B, p.rows, Hq, D});
          fa.lse = pl.view({B, Hq, p.rows});
          fa.options = pair_options(a.options, p.causal);
          st = forward(fa);
          if (st.ok()) {
            st = ops->merge(slice(out_v, 1, p.row0, p.rows), slice(lse_v, 2, p.row0, p.rows),
                            fa.out, fa.lse);
          }
        }
      }
      finish(pending, &st);
      if (st.ok() && t + 1 < ring.world) kv = std::move(next);
    }
    FA_RING_TRY(st);
    FA_RING_TRY(ops->copy(out_v, a.out));
    if (a.lse.data != nullptr) FA_RING_TRY(ops->copy(lse_v, a.lse));
    return Status::Ok();
  } catch (const std::exception& e) {
    return Status::Error(ErrorCode::Internal, std::string("ring_forward: ") + e.what());
  }
}

Status ring_backward(const RingBackwardArgs& a, Transport& transport) noexcept {
  try {
    BackwardArgs whole;
    whole.q = a.q;
    whole.k = a.k;
    whole.v = a.v;
    whole.out = a.out;
    whole.dout = a.dout;
    whole.lse = a.lse;
    whole.dq = a.dq;
    whole.dk = a.dk;
    whole.dv = a.dv;
    whole.options = pair_options(a.options, false);
    size_t ws = 0;
    FA_RING_TRY(backward_workspace_bytes(whole, &ws));
    Ring ring;
    FA_RING_TRY(check_ring(a.q, a.k, a.v, a.seqlens_k, a.options, transport, &ring));

    std::unique_ptr<Ops> ops = make_ops(a.q, a.options.stream);
    const DType dt = a.q.dtype;
    const int64_t B = a.q.shape[0], Sq = a.q.shape[1], Hq = a.q.shape[2], D = a.q.shape[3];
    const int64_t Hkv = a.k.shape[2];
    Buf dq_acc;
    FA_RING_TRY(ops->alloc(DType::F32, B * Sq * Hq * D, &dq_acc));
    const TensorView dq_v = dq_acc.view({B, Sq, Hq, D});
    FA_RING_TRY(ops->fill(dq_v, 0.0f));
    KV kv;
    FA_RING_TRY(make_kv(*ops, dt, B, a.k.shape[1], Hkv, D, &kv));
    FA_RING_TRY(ops->copy(a.k, kv.k()));
    FA_RING_TRY(ops->copy(a.v, kv.v()));
    // dK/dV of the K/V chunk held now, in fp32; it travels with the chunk
    // one step behind and reaches its owner after the last step.
    KV dkv;
    FA_RING_TRY(make_kv(*ops, DType::F32, B, a.k.shape[1], Hkv, D, &dkv));
    FA_RING_TRY(ops->fill(dkv.buf.view({dkv.buf.n}), 0.0f));
    std::unique_ptr<Pending> dkv_pending;
    KV dkv_next;

    Status st;
    for (int t = 0; t < ring.world && st.ok(); ++t) {
      const int src = ring.src(t);
      std::unique_ptr<Pending> kv_pending;
      KV kv_next;
      if (t + 1 < ring.world) {
        st = make_kv(*ops, dt, B, ring.sk[size_t(ring.src(t + 1))], Hkv, D, &kv_next);
        if (st.ok()) {
          st = transport.start_exchange(kv.buf.data(), kv.buf.bytes(), kv_next.buf.data(),
                                        kv_next.buf.bytes(), kTagKV, &kv_pending);
        }
        if (!st.ok()) break;
      }
      const Pair p = pair_for(ring, src, Sq);
      Buf dqp, dkp, dvp, lse_rows;
      if (!p.empty()) {
        // The library wants a contiguous LSE: the rows' slice, copied.
        st = ops->alloc(DType::F32, B * Hq * p.rows, &lse_rows);
        if (st.ok()) st = ops->copy(slice(a.lse, 2, p.row0, p.rows), lse_rows.view({B, Hq, p.rows}));
        if (st.ok()) st = ops->alloc(dt, B * p.rows * Hq * D, &dqp);
        if (st.ok()) st = ops->alloc(dt, B * p.keys * Hkv * D, &dkp);
        if (st.ok()) st = ops->alloc(dt, B * p.keys * Hkv * D, &dvp);
        if (st.ok()) {
          BackwardArgs ba;
          ba.q = slice(a.q, 1, p.row0, p.rows);
          ba.k = slice(kv.k(), 1, p.key0, p.keys);
          ba.v = slice(kv.v(), 1, p.key0, p.keys);
          ba.out = slice(a.out, 1, p.row0, p.rows);
          ba.dout = slice(a.dout, 1, p.row0, p.rows);
          ba.lse = lse_rows.view({B, Hq, p.rows});
          ba.dq = dqp.view({B, p.rows, Hq, D});
          ba.dk = dkp.view({B, p.keys, Hkv, D});
          ba.dv = dvp.view({B, p.keys, Hkv, D});
          ba.options = pair_options(a.options, p.causal);
          st = backward(ba);
          if (st.ok()) st = ops->accumulate(ba.dq, slice(dq_v, 1, p.row0, p.rows));
        }
      }
      finish(dkv_pending, &st);  // src's accumulator, from the previous rank
      if (!st.ok()) {
        finish(kv_pending, &st);
        break;
      }
      if (t > 0) dkv = std::move(dkv_next);
      if (!p.empty()) {
        st = ops->accumulate(dkp.view({B, p.keys, Hkv, D}), slice(dkv.k(), 1, p.key0, p.keys));
        if (st.ok()) {
          st = ops->accumulate(dvp.view({B, p.keys, Hkv, D}), slice(dkv.v(), 1, p.key0, p.keys));
        }
      }
      if (st.ok() && ring.world > 1) {
        // After the last step rank r holds rank r+1's accumulator and
        // receives its own from rank r-1.
        st = make_kv(*ops, DType::F32, B, ring.sk[size_t(ring.src(t + 1))], Hkv, D, &dkv_next);
        if (st.ok()) {
          st = transport.start_exchange(dkv.buf.data(), dkv.buf.bytes(), dkv_next.buf.data(),
                                        dkv_next.buf.bytes(), kTagDKV, &dkv_pending);
        }
      }
      finish(kv_pending, &st);
      if (st.ok() && t + 1 < ring.world) kv = std::move(kv_next);
    }
    finish(dkv_pending, &st);
    FA_RING_TRY(st);
    if (ring.world > 1) dkv = std::move(dkv_next);
    FA_RING_TRY(ops->copy(dq_v, a.dq));
    FA_RING_TRY(ops->copy(dkv.k(), a.dk));
    FA_RING_TRY(ops->copy(dkv.v(), a.dv));
    return Status::Ok();
  } catch (const std::exception& e) {
    return Status::Error(ErrorCode::Internal, std::string("ring_backward: ") + e.what());
  }
}

}  // namespace flashattn::ring
