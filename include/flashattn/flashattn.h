/* flashattn C ABI: exact FlashAttention (tiled, online softmax, O(N) memory).
 *
 * The stable boundary for C callers, Python (ctypes) and other languages.
 * Every function returns an fa_status and never throws or aborts; after a
 * failure fa_last_error() returns a message (thread-local) that names the
 * offending argument and what was expected. On failure no output is written.
 *
 * Layout: Q/K/V/O are 4-D [batch, seqlen, heads, head_dim] (BSHD) with
 * arbitrary strides counted in elements; the last dimension must be
 * contiguous (stride 1). BHSD callers pass BHSD strides. LSE is fp32
 * [batch, heads_q, seqlen_q], contiguous, natural log. Head dims are 1 to
 * 256 (the KV cache: multiples of 8); V (and O, dO, dV) may have a head dim
 * of its own (flashattn.hpp says where and how).
 *
 * Variable-length batches: fa_forward_varlen / fa_backward_varlen take the
 * same args with 3-D [total_tokens, heads, head_dim] tensors plus an
 * fa_varlen (cu_seqlens int32 [batch + 1]); LSE is then [heads_q, total_q].
 * KV-cache decoding: fa_forward_kvcache (see fa_kvcache_args). The semantics
 * are those of flashattn.hpp (Varlen, KvCacheArgs), which states them in full;
 * cache_seqlens is not updated by the library.
 */
#ifndef FLASHATTN_H_
#define FLASHATTN_H_

#include <stddef.h>
#include <stdint.h>

#if defined(_WIN32)
#define FA_API __declspec(dllexport)
#else
#define FA_API __attribute__((visibility("default")))
#endif

#ifdef __cplusplus
extern "C" {
#endif

#define FA_VERSION_MAJOR 0
#define FA_VERSION_MINOR 1
#define FA_VERSION_PATCH 0

typedef enum fa_dtype {
  FA_F32 = 0,
  FA_F16 = 1,
  FA_BF16 = 2,
  FA_I32 = 3,   /* index tensors */
  FA_F8E4M3 = 4 /* fp8 e4m3 ("e4m3fn"): fa_forward / fa_forward_fp8 inputs only */
} fa_dtype;
typedef enum fa_device { FA_CPU = 0, FA_CUDA = 1 } fa_device;
typedef enum fa_status {
  FA_OK = 0,
  FA_ERR_INVALID_ARGUMENT = 1, /* shape, dtype, stride, null pointer, ... */
  FA_ERR_UNSUPPORTED = 2,      /* valid request this build/device cannot run */
  FA_ERR_CUDA = 3,             /* a CUDA runtime error */
  FA_ERR_INTERNAL = 4          /* a bug: please report */
} fa_status;

typedef struct fa_tensor {
  void* data;
  int32_t dtype;        /* fa_dtype */
  int32_t device;       /* fa_device */
  int32_t device_index; /* CUDA ordinal; 0 for CPU */
  int32_t ndim;
  int64_t shape[4];
  int64_t stride[4]; /* in elements */
} fa_tensor;

typedef struct fa_options {
  float softmax_scale;  /* 0 means 1/sqrt(head_dim) */
  float softcap;        /* 0 disables; else s = cap * tanh(s / cap) */
  int64_t window_left;  /* -1 = unbounded */
  int64_t window_right; /* -1 = unbounded; causal forces 0 */
  int32_t causal;       /* bottom-right aligned: j <= i + Sk - Sq */
  int32_t deterministic;/* backward: fixed accumulation order */
  void* stream;         /* cudaStream_t for CUDA tensors; NULL = default */
  /* ALiBi and dropout (CPU backend only; CUDA answers FA_ERR_UNSUPPORTED).
   * Semantics, varlen / KV-cache indexing: flashattn.hpp (Options). */
  fa_tensor alibi_slopes;  /* optional (data NULL = off): fp32 [heads_q] or [batch, heads_q] */
  float dropout_p;         /* in [0, 1); 0 = off */
  uint64_t dropout_seed;   /* Philox key */
  uint64_t dropout_offset; /* Philox counter offset: a new one per call */
} fa_options;

typedef struct fa_forward_args {
  fa_tensor q, k, v; /* inputs */
  fa_tensor out;     /* [B, Sq, Hq, D], dtype of q */
  fa_tensor lse;     /* optional (data NULL = not written): fp32 [B, Hq, Sq] */
  fa_options options;
  fa_tensor dropout_mask; /* optional testing aid with dropout: int32 [B, Hq, Sq, Sk]
                             receives the keep mask (1 kept, 0 dropped or masked) */
} fa_forward_args;

typedef struct fa_backward_args {
  fa_tensor q, k, v, out, dout; /* forward inputs, its output and dL/dO */
  fa_tensor lse;                /* from the forward: fp32 [B, Hq, Sq] */
  fa_tensor dq, dk, dv;         /* outputs, shaped like q, k, v */
  fa_options options;
} fa_backward_args;

/* Variable-length batch: both cu_seqlens set, int32 [batch + 1] on q's
 * device, non-decreasing from 0; max_seqlen_* >= every sequence's length.
 * Packed rows past cu_seqlens[batch] are written as rows that see no key
 * (out 0, LSE -inf, dq / dk / dv 0). */
typedef struct fa_varlen {
  fa_tensor cu_seqlens_q, cu_seqlens_k;
  int64_t max_seqlen_q, max_seqlen_k;
} fa_varlen;

/* KV cache: q [B, Sq, Hq, D]; k_cache / v_cache [B, capacity, Hkv, D], or
 * [num_pages, page_size, Hkv, D] (page_size a multiple of 16) with
 * block_table int32 [B, max_pages]; cache_seqlens int32 [B]; optional
 * k_new / v_new [B, S_new, Hkv, D] written into the cache at cache_seqlens[b]
 * before the attention over keys [0, cache_seqlens[b] + S_new). num_splits:
 * split-KV pieces, 0 = heuristic. block_table.data / k_new.data NULL = unused. */
typedef struct fa_kvcache_args {
  fa_tensor q, k_cache, v_cache, cache_seqlens, block_table, k_new, v_new;
  fa_tensor out; /* [B, Sq, Hq, D], dtype of q */
  fa_tensor lse; /* optional: fp32 [B, Hq, Sq] */
  fa_options options;
  int32_t num_splits;
  /* Optional (data NULL = off), as KvCacheArgs in flashattn.hpp describes:
   * cache_batch_idx / cache_leftpad int32 [B]; rotary_cos / rotary_sin
   * [seqlen_ro, rotary_dim / 2] in q's dtype (needs k_new), rotated in pairs
   * (2i, 2i+1) when rotary_interleaved != 0, else (i, i + rotary_dim / 2). */
  fa_tensor cache_batch_idx, cache_leftpad, rotary_cos, rotary_sin;
  int32_t rotary_interleaved;
} fa_kvcache_args;

/* Defaults: scale 0 (= 1/sqrt(d)), no softcap, unbounded window, not
 * causal, not deterministic, default stream, no ALiBi, no dropout. */
FA_API void fa_options_init(fa_options* options);

/* A contiguous BSHD (or any row-major) tensor view. */
FA_API fa_tensor fa_tensor_contiguous(void* data, fa_dtype dtype, fa_device device,
                                      int32_t device_index, int32_t ndim,
                                      const int64_t* shape);

FA_API fa_status fa_forward(const fa_forward_args* args);
FA_API fa_status fa_backward(const fa_backward_args* args);
FA_API fa_status fa_forward_varlen(const fa_forward_args* args, const fa_varlen* varlen);
FA_API fa_status fa_backward_varlen(const fa_backward_args* args, const fa_varlen* varlen);
FA_API fa_status fa_forward_kvcache(const fa_kvcache_args* args);

/* FP8 forward: q, k, v FA_F8E4M3, out FA_BF16. The attention of the
 * dequantised tensors q * q_descale, k * k_descale, v * v_descale; each
 * descale is optional (data NULL = 1): fp32 [1] on q's device. scales may be
 * NULL (all 1; then the same as fa_forward). Semantics and limits:
 * flashattn.hpp (Fp8Descale). */
typedef struct fa_fp8_descale {
  fa_tensor q, k, v;
} fa_fp8_descale;
FA_API fa_status fa_forward_fp8(const fa_forward_args* args, const fa_fp8_descale* scales);
/* The same on a variable-length batch (packed q, k, v as fa_forward_varlen
 * takes them; CUDA: the Hopper kernel, as for padded batches). */
FA_API fa_status fa_forward_varlen_fp8(const fa_forward_args* args, const fa_varlen* varlen,
                                       const fa_fp8_descale* scales);

/* Bytes of scratch memory the call would allocate (host for CPU tensors,
 * device for CUDA tensors); the inputs and outputs are not counted. */
FA_API fa_status fa_forward_workspace_bytes(const fa_forward_args* args, size_t* bytes);
FA_API fa_status fa_backward_workspace_bytes(const fa_backward_args* args, size_t* bytes);
FA_API fa_status fa_forward_kvcache_workspace_bytes(const fa_kvcache_args* args, size_t* bytes);

/* Message of the last failed call on this thread ("" if none). */
FA_API const char* fa_last_error(void);
/* "MAJOR.MINOR.PATCH" and MAJOR*10000 + MINOR*100 + PATCH. */
FA_API const char* fa_version_string(void);
FA_API int32_t fa_version(void);
/* 1 if this build carries CUDA kernels and a CUDA device is visible. */
FA_API int32_t fa_cuda_available(void);

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* FLASHATTN_H_ */
