// Ring attention (context parallelism): one sequence split over the P ranks
// of a ring, each rank holding its local chunk of Q, K, V. K/V chunks travel
// around the ring (rank r sends to r+1, receives from r-1); the transfer of
// the next chunk is started before the current chunk's attention, so the two
// overlap. Partial (O, LSE) results are merged with the online-softmax
// rescale rule (merge_partial). The backward passes K/V around again with
// fp32 dK/dV accumulators that come home to their owner after P steps; each
// (query chunk, key chunk) pair's gradient is the library backward called
// with the GLOBAL out and LSE, which makes every pair's contribution exact.
//
// Causal attention uses the zig-zag layout for load balance: the sequence is
// cut into 2P chunks (zigzag_chunk_sizes) and rank r holds chunks r and
// 2P-1-r, concatenated. Non-causal attention accepts any split.
//
// Transports: make_local_ring (threads of one process, host memory: CPU
// tensors; for tests and simulation) and, in CUDA builds that found nccl.h,
// ring_nccl.hpp (CUDA tensors). With CUDA tensors every step (library calls,
// merges, accumulations, transfers) is enqueued on options.stream and the
// host does not wait; buffers are allocated stream-ordered (cudaMallocAsync).
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

#include "flashattn/flashattn.hpp"

namespace flashattn::ring {

// A transfer in flight; after wait() the receive buffer is filled and the
// send buffer may be reused (for a device transport: in stream order, i.e.
// for work enqueued afterwards on the caller's stream).
class Pending {
 public:
  virtual ~Pending() = default;
  virtual Status wait() noexcept = 0;
};

// One rank's links to its ring neighbours.
class Transport {
 public:
  virtual ~Transport() = default;
  virtual int rank() const noexcept = 0;
  virtual int world_size() const noexcept = 0;
  // Where the buffers it moves live: the ring refuses tensors elsewhere.
  virtual Device device() const noexcept = 0;
  // Starts sending send_bytes at `send` to rank+1 and receiving recv_bytes
  // into `recv` from rank-1. Messages with the same tag arrive in the order
  // they were sent; both buffers must stay valid, and `send` unchanged,
  // until the returned Pending's wait() has returned.
  virtual Status start_exchange(const void* send, size_t send_bytes, void* recv,
                                size_t recv_bytes, int tag,
                                std::unique_ptr<Pending>* pending) noexcept = 0;
};

// `world` transports that talk through shared memory, one per rank; each is
// meant to be driven by its own thread. A wait() gives up with an error after
// `timeout_ms` without a message (a rank that failed never sends).
FLASHATTN_EXPORT std::vector<std::unique_ptr<Transport>> make_local_ring(
    int world, int64_t timeout_ms = 120000);

// CUDA builds only (the symbol exists where FLASHATTN_WITH_CUDA was on): one
// transport per stream in `streams` (rank r computes on streams[r]), all on
// CUDA device `device`, passing messages through host memory. Synchronous and
// slow: it tests the ring's CUDA path on one GPU.
FLASHATTN_EXPORT std::vector<std::unique_ptr<Transport>> make_local_cuda_ring(
    int device, const std::vector<void*>& streams, int64_t timeout_ms = 120000);

// Sizes of the 2*world zig-zag chunks of `total` tokens: the first
// total % (2*world) chunks are one token longer.
FLASHATTN_EXPORT std::vector<int64_t> zigzag_chunk_sizes(int64_t total, int world);

struct RingForwardArgs {
  TensorView q, k, v;  // local: [B, Sq_r, Hq, D], [B, Sk_r, Hkv, D], [B, Sk_r, Hkv, D]
  TensorView out;      // [B, Sq_r, Hq, D], dtype of q
  TensorView lse;      // optional: fp32 [B, Hq, Sq_r] contiguous, over the whole sequence
  // The local K/V length of every rank (size world); causal needs the
  // zig-zag layout: seqlens_k[r] = c_r + c_{2P-1-r} and Sq_r = Sk_r.
  std::vector<int64_t> seqlens_k;
  Options options;  // softmax_scale and causal; windows and softcap are refused
};

struct RingBackwardArgs {
  TensorView q, k, v, out, dout;  // local; out is the ring forward's output
  TensorView lse;                 // the ring forward's LSE (required)
  TensorView dq, dk, dv;          // local gradients, shaped like q, k, v
  std::vector<int64_t> seqlens_k;
  Options options;
};

// Every rank of the ring calls these with its own arguments and transport.
// Argument errors are found before any transfer and leave outputs untouched;
// a transport error mid-ring is returned as it is (outputs untouched too:
// they are written after the last step).
FLASHATTN_EXPORT Status ring_forward(const RingForwardArgs& args, Transport& transport) noexcept;
FLASHATTN_EXPORT Status ring_backward(const RingBackwardArgs& args, Transport& transport) noexcept;

// The rescale rule, in place: out_acc fp32 [B, S, H, D] and lse_acc fp32
// [B, H, S] (any strides, last dim of out_acc contiguous; lse_acc = -inf where
// nothing is seen yet) absorb part_out [B, S, H, D] (any dtype) and part_lse
// fp32 [B, H, S], the attention of the same queries over a disjoint key set:
//   lse' = max + log1p(exp(min - max)),  out' = out e^(lse - lse') + part e^(part_lse - lse')
// A row with -inf on both sides stays out = 0, lse = -inf. CPU tensors.
FLASHATTN_EXPORT Status merge_partial(const TensorView& out_acc, const TensorView& lse_acc,
                                      const TensorView& part_out,
                                      const TensorView& part_lse) noexcept;

}  // namespace flashattn::ring
