// flashattn C++17 API: exact FlashAttention (tiled, online softmax, O(N)
// extra memory) with one interface over CPU and CUDA backends.
//
//   O   = softmax(scale * Q K^T [+ mask, softcap]) V
//   LSE = log(sum_j exp(scale * q_i . k_j))      (fp32, natural log)
//
// Tensors are [batch, seqlen, heads, head_dim] (BSHD) views with arbitrary
// strides in elements (last dim contiguous). GQA: heads_q % heads_kv == 0 and
// query head h reads kv head h / (heads_q / heads_kv). Head dims are 1 to
// 256; the kernels take multiples of 8 (fp8: 16), and a call with any other
// head dim runs on zero-padded workspace copies of its tensors at the next
// multiple (O(N * d) memory, counted by *_workspace_bytes), except
// forward_kvcache, which reads and appends into the cache in place and takes
// multiples of 8 only. v may have a head dim Dv of its own (e.g. DeepSeek's
// 192 / 128; not with fp8, the KV cache or the ring): out / dout / dv are
// then [.., Dv] and the default scale stays 1/sqrt(q's head_dim). Except for
// the Hopper (sm90a) forward and backward, the backends run one head dim:
// such a call then pads the narrower side with zeros into workspace copies
// in the same way. Causal masking is
// bottom-right aligned (query i sees key j iff j <= i + Sk - Sq). A row that
// sees no key gives O = 0 and LSE = -inf.
//
// Functions never throw: failures come back as a Status whose message names
// the argument and what was expected, and no output is written.
//
// Variable-length batches (flash-attn's flash_attn_varlen_func): set
// cu_seqlens_q / cu_seqlens_k (int32 [batch + 1], non-decreasing, starting
// at 0) and max_seqlen_q / max_seqlen_k in ForwardArgs / BackwardArgs. Then
// q / out / dout / dq are 3-D [total_q, heads_q, head_dim] and k / v / dk / dv
// are [total_k, heads_kv, head_dim]; sequence b owns rows
// [cu_seqlens_q[b], cu_seqlens_q[b+1]) of q and [cu_seqlens_k[b],
// cu_seqlens_k[b+1]) of k and v. LSE is fp32 [heads_q, total_q] (as in
// flash-attn). Causal is bottom-right aligned per sequence; a sequence of
// length 0 is allowed (no query rows: nothing written; no keys: O = 0,
// LSE = -inf; in the backward the gradients of its rows are zero). The
// packed tensors may have more rows than the sequences: rows at or past
// cu_seqlens_q[batch] (of out, LSE, dq) and cu_seqlens_k[batch] (of dk, dv)
// are written as rows that see no key (O = 0, LSE = -inf, gradients 0).
//
// KV-cache decoding (flash-attn's flash_attn_with_kvcache): forward_kvcache()
// with KvCacheArgs below. cache_seqlens is NOT updated by the library (as in
// flash-attn): after appending s_new tokens the caller adds s_new itself.
//
// The int32 index tensors (cu_seqlens, cache_seqlens, block_table) live on
// the device of q. For CPU tensors their values are validated (monotone,
// within capacity, pages in range) before anything is written. For CUDA
// tensors the host never reads them (no synchronisation, CUDA-graph safe), so
// values out of range are the caller's bug, as in flash-attn; their shapes,
// dtypes and devices are still checked.
#pragma once

#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <string>

#if defined(_WIN32)
#define FLASHATTN_EXPORT __declspec(dllexport)
#else
#define FLASHATTN_EXPORT __attribute__((visibility("default")))
#endif

namespace flashattn {

// I32: index tensors only. F8E4M3 (OCP fp8 e4m3, "e4m3fn": no infinities,
// max 448): forward() inputs only, see Fp8Descale below.
enum class DType : int32_t { F32 = 0, F16 = 1, BF16 = 2, I32 = 3, F8E4M3 = 4 };
enum class Device : int32_t { CPU = 0, CUDA = 1 };

FLASHATTN_EXPORT const char* dtype_name(DType dtype) noexcept;
FLASHATTN_EXPORT size_t dtype_size(DType dtype) noexcept;

struct TensorView {
  void* data = nullptr;
  DType dtype = DType::F32;
  Device device = Device::CPU;
  int32_t device_index = 0;
  int32_t ndim = 0;
  int64_t shape[4] = {0, 0, 0, 0};
  int64_t stride[4] = {0, 0, 0, 0};  // in elements

  // Row-major view over `shape` (1 to 4 dims).
  FLASHATTN_EXPORT static TensorView contiguous(void* data, DType dtype, std::initializer_list<int64_t> shape,
                               Device device = Device::CPU, int32_t device_index = 0) noexcept;
  FLASHATTN_EXPORT int64_t numel() const noexcept;
};

// ALiBi and dropout (CPU and CUDA backends, the same keep mask on both;
// ring attention refuses them). Varlen and KV-cache calls take
// them too: slopes [batch, heads_q] then have one row per sequence, and the
// dropout indices (b, i, j) are the sequence, and the row and key within it;
// the keep mask is returned for padded batches only.
//
// ALiBi, as flash-attn defines it: with slope = alibi_slopes[h] (or [b, h])
// the score of query i and key j becomes
//   s = softcap(scale * q_i.k_j) - slope * |i + Sk - Sq - j|
// i.e. the bias is added after the scale and after the softcap (flash-attn
// adds slope/scale to the raw score after its tanh, then scales). flash-attn's
// causal kernels add slope * j instead, which differs by a per-row constant:
// the same O, an LSE larger by slope * (i + Sk - Sq) there; ours is the
// |.| form in every case.
//
// Dropout on P: P~ = P o Z / (1 - dropout_p), O = P~ V, with Z the keep mask
// of a counter-based Philox4x32-10 generator keyed by (dropout_seed,
// dropout_offset) and indexed by (batch, head, query row, key) (the formula:
// src/common/philox.hpp), so the backward regenerates the same Z and the mask
// does not depend on tiling or thread count. LSE is of the undropped softmax
// (as in flash-attn). Use a new offset (or seed) for every call that needs
// fresh randomness.
struct Options {
  float softmax_scale = 0.0f;  // 0 means 1/sqrt(head_dim)
  float softcap = 0.0f;        // 0 disables; else s = cap * tanh(s / cap)
  int64_t window_left = -1;    // keys allowed left of the diagonal; -1 = unbounded
  int64_t window_right = -1;   // keys allowed right of the diagonal; causal forces 0
  bool causal = false;
  bool deterministic = false;  // backward: fixed accumulation order
  void* stream = nullptr;      // cudaStream_t for CUDA tensors
  TensorView alibi_slopes;     // optional fp32 [heads_q] or [batch, heads_q], on q's device
  float dropout_p = 0.0f;      // in [0, 1); 0 = no dropout
  uint64_t dropout_seed = 0, dropout_offset = 0;
};

// Optional variable-length batch description (see the top of this file);
// all fields unset (cu_seqlens_q.data == nullptr) means padded BSHD tensors.
struct Varlen {
  TensorView cu_seqlens_q, cu_seqlens_k;  // int32 [batch + 1], both set or neither
  int64_t max_seqlen_q = 0, max_seqlen_k = 0;  // >= every sequence's length
  bool enabled() const noexcept { return cu_seqlens_q.data != nullptr || cu_seqlens_k.data != nullptr; }
};

// FP8 forward (forward(), padded or varlen batches; no backward or KV
// cache): q, k and v all F8E4M3, out BF16. The attention computed is that
// of the dequantised tensors q * q_descale, k * k_descale, v * v_descale
// (per-tensor factors, as FlashAttention-3's descale arguments), in fp32
// accumulation; P is rounded to e4m3 before P V as the tensor cores take it.
// Each factor is optional: an fp32 tensor of one element ([1]) on q's device,
// read by the kernel (no host synchronisation); data == nullptr means 1.
// CUDA: Hopper (sm_90a) only, head dims that are multiples of 16 up to 256
// (on the kernel's 128 and 256 tiles), no softcap, ALiBi or dropout. CPU:
// every head dim and variant (computed in fp32 from the dequantised inputs).
struct Fp8Descale {
  TensorView q, k, v;
};

struct ForwardArgs {
  TensorView q, k, v;  // [B, Sq, Hq, D], [B, Sk, Hkv, D], [B, Sk, Hkv, Dv]
  TensorView out;      // [B, Sq, Hq, Dv], dtype of q (BF16 for F8E4M3 inputs)
  TensorView lse;      // optional (data == nullptr): fp32 [B, Hq, Sq] contiguous
  Options options;
  Varlen varlen;       // optional: packed [total, heads, head_dim] tensors
  // Optional testing aid with dropout: int32 [B, Hq, Sq, Sk] contiguous,
  // receives Z (1 kept, 0 dropped; 0 also where the causal/window mask hides
  // the key).
  TensorView dropout_mask;
  Fp8Descale fp8_descale;  // F8E4M3 inputs only (see above)
};

struct BackwardArgs {
  TensorView q, k, v, out, dout;  // forward inputs, its output, dL/dO
  TensorView lse;                 // from the forward
  TensorView dq, dk, dv;          // outputs, shaped like q, k, v
  Options options;
  Varlen varlen;                  // optional: as in ForwardArgs (LSE [Hq, total_q])
};

// Attention of a few new query tokens per sequence against a KV cache, with
// optional in-place append first (flash-attn's flash_attn_with_kvcache).
//   q        [B, Sq, Hq, D]
//   k_cache, v_cache  [B, capacity, Hkv, D], or, with block_table (paged KV),
//            [num_pages, page_size, Hkv, D] with page_size a multiple of 16
//   block_table  optional int32 [B, max_pages]: token t of sequence b lives in
//            page block_table[b][t / page_size], row t % page_size
//   cache_seqlens  int32 [B]: tokens already in sequence b's cache
//   k_new, v_new   optional [B, S_new, Hkv, D]: written into the cache at
//            positions cache_seqlens[b] .. + S_new - 1 before the attention
//   The attention for sequence b sees keys [0, cache_seqlens[b] + S_new);
//   causal is bottom-right aligned (the last query sits on the last key).
//   cache_seqlens is not updated (the caller adds S_new, as in flash-attn).
//   num_splits: how many pieces the key range is split into (flash-decoding,
//   partial results merged by their LSE); 0 = chosen by a heuristic.
// Capacity overflow (cache_seqlens[b] + S_new > capacity, or more pages than
// the block table has) is an error, checked before anything is written (CPU).
//
// Optional, as in flash-attn (each off when its data is null):
//   cache_batch_idx  int32 [B]: sequence b uses cache entry cache_batch_idx[b]
//            of a contiguous [B_cache, capacity, Hkv, D] cache (B_cache may
//            differ from B; entries must be distinct when appending). Not
//            with block_table.
//   cache_leftpad    int32 [B]: sequence b's cache starts at row
//            cache_leftpad[b]: it attends to rows [cache_leftpad[b],
//            cache_seqlens[b] + S_new), and masks (causal, window, ALiBi)
//            count from that row. cache_seqlens stays the end row. Not with
//            block_table.
//   rotary_cos, rotary_sin  [seqlen_ro, rotary_dim / 2], dtype of q, last dim
//            contiguous (rotary embedding, RoPE; needs k_new): k_new row s is
//            rotated at position cache_seqlens[b] + s as it is appended; q row
//            i at position cache_seqlens[b] + i when causal or windowed, else
//            at cache_seqlens[b] for every row (flash-attn's rule). Dimensions
//            from rotary_dim on pass through. rotary_dim is even and <= D
//            (the CUDA backend: a multiple of 16); seqlen_ro must cover every
//            position used. rotary_interleaved: pairs (2i, 2i+1) (GPT-J)
//            instead of (i, i + rotary_dim / 2) (GPT-NeoX). Computed in fp32,
//            rounded to the dtype.
struct KvCacheArgs {
  TensorView q;
  TensorView k_cache, v_cache;
  TensorView cache_seqlens;
  TensorView block_table;  // optional
  TensorView k_new, v_new;  // optional, both or neither
  TensorView out;          // [B, Sq, Hq, D], dtype of q
  TensorView lse;          // optional: fp32 [B, Hq, Sq] contiguous
  Options options;         // deterministic is ignored (the forward always is)
  int32_t num_splits = 0;
  TensorView cache_batch_idx;       // optional
  TensorView cache_leftpad;         // optional
  TensorView rotary_cos, rotary_sin;  // optional, both or neither
  bool rotary_interleaved = false;
};

enum class ErrorCode : int32_t {
  Ok = 0,
  InvalidArgument = 1,
  Unsupported = 2,
  CudaError = 3,
  Internal = 4,
};

struct Status {
  ErrorCode code = ErrorCode::Ok;
  std::string message;

  bool ok() const noexcept { return code == ErrorCode::Ok; }
  static Status Ok() { return {}; }
  static Status Error(ErrorCode code, std::string message) { return {code, std::move(message)}; }
};

FLASHATTN_EXPORT Status forward(const ForwardArgs& args) noexcept;
FLASHATTN_EXPORT Status backward(const BackwardArgs& args) noexcept;
FLASHATTN_EXPORT Status forward_kvcache(const KvCacheArgs& args) noexcept;

// Scratch bytes the call allocates besides its inputs and outputs (host memory
// for CPU tensors, device memory for CUDA). Grows as O(N), never O(N^2).
FLASHATTN_EXPORT Status forward_workspace_bytes(const ForwardArgs& args, size_t* bytes) noexcept;
FLASHATTN_EXPORT Status backward_workspace_bytes(const BackwardArgs& args, size_t* bytes) noexcept;
FLASHATTN_EXPORT Status forward_kvcache_workspace_bytes(const KvCacheArgs& args, size_t* bytes) noexcept;

FLASHATTN_EXPORT const char* version() noexcept;
FLASHATTN_EXPORT bool cuda_available() noexcept;

}  // namespace flashattn
