// Host adapter of the Hopper backward: can_implement_bwd, the workspace
// layout, TMA descriptors of Q, K, V, dO, dispatch to the per-(dtype, head
// dim) launchers in inst/bwd_*.cu. Tensor maps: tma_desc.hpp.
#include "bwd_sm90.hpp"

#include <cuda.h>
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <climits>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <string>

#include "bwd_kernel_args.hpp"
#include "bwd_launch.hpp"
#include "tile_rules.hpp"
#include "tma_desc.hpp"

namespace flashattn::detail::cuda::sm90 {
namespace {

Status unsupported(const std::string& m) {
  return Status::Error(ErrorCode::Unsupported, "sm90 backward: " + m);
}

constexpr int64_t kMaxSeqlen = int64_t(1) << 28;

// The head dims compiled in (src/cuda/CMakeLists.txt: those of
// FLASHATTN_HDIMS that the kernel supports, bwd_traits.cuh).
bool head_dim_built(int64_t d) {
#ifdef FLASHATTN_SM90_BWD_HDIM_64
  if (d == 64) return true;
#endif
#ifdef FLASHATTN_SM90_BWD_HDIM_128
  if (d == 128) return true;
#endif
#ifdef FLASHATTN_SM90_BWD_HDIM_192
  if (d == 192) return true;
#endif
#ifdef FLASHATTN_SM90_BWD_HDIM_256
  if (d == 256) return true;
#endif
  return false;
}
constexpr const char* kBuiltHeadDims = FLASHATTN_SM90_BWD_HDIMS_STR;

template <class Element, bool kVarlen>
Status launch_for_head_dim(int64_t d, const BwdKernelArgs& args, const BwdPrepArgs& prep,
                           cudaStream_t stream) {
#ifdef FLASHATTN_SM90_BWD_HDIM_128
  if constexpr (!kVarlen) {
    if (d == 128 && prep.block_m == kBwdTallBlockM) {
      return launch_bwd<Element, 128, false, kBwdTallBlockM>(args, prep, stream);
    }
  }
#endif
#ifdef FLASHATTN_SM90_BWD_HDIM_64
  if (d == 64) return launch_bwd<Element, 64, kVarlen>(args, prep, stream);
#endif
#ifdef FLASHATTN_SM90_BWD_HDIM_128
  if (d == 128) return launch_bwd<Element, 128, kVarlen>(args, prep, stream);
#endif
#ifdef FLASHATTN_SM90_BWD_HDIM_192
  if (d == 192) return launch_bwd<Element, 192, kVarlen>(args, prep, stream);
#endif
#ifdef FLASHATTN_SM90_BWD_HDIM_256
  if (d == 256) return launch_bwd<Element, 256, kVarlen>(args, prep, stream);
#endif
  return unsupported("head_dim " + std::to_string(d) + " is not built");
}

Status check_device(int device) {
  int major = 0, minor = 0;
  cudaError_t e1 = cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, device);
  cudaError_t e2 = cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, device);
  if (e1 != cudaSuccess || e2 != cudaSuccess) {
    (void)cudaGetLastError();
    return unsupported("cannot query CUDA device " + std::to_string(device));
  }
  if (major != 9 || minor != 0) return unsupported("needs a compute capability 9.0 device");
  return Status::Ok();
}

// The tile a call runs on: the wider of q's and v's head dims, the next of
// 64, 128, 192, 256 (tma_desc.hpp); the narrower operands load as zeros past
// their own head dim.
int tile_of(const BwdParams& p) { return bwd_tile_head_dim(std::max(p.head_dim, p.dim_v())); }

// Run-time switches read once per process, for A/B runs: NAME=0 or NAME=1
// (or up to `most`) overrides `fallback`.
int env_switch(const char* name, int fallback, int most = 1) {
  const char* e = std::getenv(name);
  return e != nullptr && e[0] >= '0' && e[0] <= '0' + most && e[1] == '\0' ? e[0] - '0' : fallback;
}

// Query rows per step. Head dim 128 has a kernel on 80-row steps
// (bwd_kernel_args.hpp, kBwdTallBlockM) for padded batches without a mask,
// softcap, ALiBi or the deterministic mode (its single dQ staging tile would
// wait for each add's turn; its mask is the keys' end alone). It takes them
// where it pays (tile_rules.hpp, bwd_tall_steps_pay).
// FLASHATTN_SM90_BWD_TALL: 0 = never, 1 = that rule, 2 = every call it can
// take (read once per process, for A/B runs and tests).
int block_m_of(const BwdParams& p) {
  const int tile = tile_of(p);
  static const int tall = env_switch("FLASHATTN_SM90_BWD_TALL", 1, 2);
  const bool masked = p.window_left >= 0 || p.window_right >= 0;
  if (!bwd_tall_steps_built(tile) || tall == 0 || masked || p.varlen() || p.deterministic ||
      p.softcap != 0.0f || p.alibi_slopes != nullptr) {
    return bwd_block_m(tile);
  }
  return tall == 2 || bwd_tall_steps_pay(p.seqlen_q) ? kBwdTallBlockM : bwd_block_m(tile);
}

// Byte layout of the workspace over its query rows (bwd_seq.cuh: [B, Hq,
// Sqp], varlen [Hq, bwd_varlen_head_rows]): lse2, dsum, the dQ accumulator
// (bwd_dq_stride floats per row), then the deterministic mode's
// counters, one per block_m_of rows (zeroed with the accumulator); every
// part 256-byte aligned.
struct Layout {
  int64_t sq_pad = 0, head_rows = 0, rows = 0;
  size_t lse2 = 0, dsum = 0, dq = 0, order = 0, total = 0;
};
Layout layout(const BwdParams& p) {
  Layout l;
  const int bm = block_m_of(p);
  l.sq_pad = (p.seqlen_q + bm - 1) / bm * bm;
  l.head_rows = p.varlen() ? bwd_varlen_head_rows(p.total_q, p.batch, bm) : l.sq_pad;
  l.rows = (p.varlen() ? 1 : p.batch) * p.heads_q * l.head_rows;
  const size_t rows = static_cast<size_t>(l.rows);
  const size_t rows_bytes = (rows * sizeof(float) + 255) / 256 * 256;
  l.lse2 = 0;
  l.dsum = rows_bytes;
  l.dq = 2 * rows_bytes;
  const size_t dq_stride = bwd_dq_stride(tile_of(p), bm);
  l.order = l.dq + (rows * dq_stride * sizeof(float) + 255) / 256 * 256;
  l.total = l.order + (rows / bm) * sizeof(int);
  return l;
}

// Every check that needs no workspace; fills the tensor maps and scalars.
Status prepare(const BwdParams& p, BwdKernelArgs* args) {
  if (p.dtype != DType::F16 && p.dtype != DType::BF16) return unsupported("dtype must be fp16 or bf16");
  // A head_dim between the tiles runs on the one above it (bwd_tile_head_dim,
  // tma_desc.hpp); v with a head dim of its own on the wider one's.
  for (int64_t d : {p.head_dim, p.dim_v()}) {
    if (d <= 0 || d > 256 || d % 8 != 0) {
      return unsupported("head_dim " + std::to_string(d) + " (multiples of 8 up to 256)");
    }
  }
  if (!head_dim_built(tile_of(p))) {
    return unsupported("head_dim " + std::to_string(std::max(p.head_dim, p.dim_v())) + " (tiles built: " +
                       kBuiltHeadDims + "; a multiple of 8 runs on the tile at or above it)");
  }
  if (!(p.softcap >= 0.0f) || !std::isfinite(p.softcap)) return unsupported("softcap must be finite and >= 0");
  if (p.dropout_p > 0.0f) return unsupported("dropout runs on the sm80 kernels");
  if (!(p.scale > 0.0f) || !std::isfinite(p.scale)) return unsupported("scale must be positive and finite");
  if (p.batch <= 0 || p.heads_q <= 0 || p.seqlen_q <= 0 || p.seqlen_k <= 0) {
    return unsupported("empty problem (the sm80 path handles it)");
  }
  if (p.seqlen_q > kMaxSeqlen || p.seqlen_k > kMaxSeqlen) return unsupported("sequence lengths above 2^28");
  if (p.heads_kv <= 0 || p.heads_q % p.heads_kv != 0) return unsupported("heads_q must be a multiple of heads_kv");
  if (p.batch > 65535 || p.heads_kv > 65535) return unsupported("batch and heads_kv must be at most 65535");
  if (p.lse == nullptr) return unsupported("needs the forward's LSE");
  // Varlen (cu_seqlens) batches run here; KV-cache lengths and block tables
  // have no backward.
  if (p.seqlens_k != nullptr || p.block_table != nullptr) {
    return unsupported("KV-cache lengths and paged K/V have no backward here");
  }
  const bool varlen = p.varlen();
  if (varlen && (p.cu_seqlens_k == nullptr || p.total_q <= 0 || p.total_k <= 0 ||
                 p.total_q > INT32_MAX || p.total_k > INT32_MAX)) {
    return unsupported("varlen needs cu_seqlens_k, packed rows on both sides and fewer than 2^31 of them");
  }
  if (Status s = check_device(p.device_index); !s.ok()) return s;

  // Varlen maps: [1, total rows, heads, head_dim] over the packed tensors.
  const int64_t map_batch = varlen ? 1 : p.batch;
  const int64_t rows_q = varlen ? p.total_q : p.seqlen_q, rows_k = varlen ? p.total_k : p.seqlen_k;
  const TmaOperand q{"q", p.q, rows_q, p.heads_q, p.q_str};
  const TmaOperand dout{"dout", p.dout, rows_q, p.heads_q, p.do_str};
  const TmaOperand k{"k", p.k, rows_k, p.heads_kv, p.k_str};
  const TmaOperand v{"v", p.v, rows_k, p.heads_kv, p.v_str};
  for (const TmaOperand* t : {&q, &dout, &k, &v}) {
    if (std::string m = tma_alignment_problem(*t, map_batch, 2); !m.empty()) return unsupported(m);
  }
  // Each map bounded by its operand's own head dim (q, k: head_dim; dO, v:
  // v's), so the narrower side's tile columns load as zeros.
  const int block_m = block_m_of(p);
  const int block_n = bwd_block_n(tile_of(p));
  std::string why = encode_tma_maps({{&args->tm_q, q, block_m}, {&args->tm_k, k, block_n}}, map_batch,
                                    p.head_dim, p.dtype);
  if (why.empty()) {
    why = encode_tma_maps({{&args->tm_do, dout, block_m}, {&args->tm_v, v, block_n}}, map_batch, p.dim_v(),
                          p.dtype);
  }
  if (!why.empty()) return unsupported(why);

  // dK/dV go out by TMA stores (bwd_kernel.cuh, bwd_kernel_split.cuh).
  const TmaOperand dk{"dk", p.dk, rows_k, p.heads_kv, p.dk_str};
  const TmaOperand dv{"dv", p.dv, rows_k, p.heads_kv, p.dv_str};
  for (const TmaOperand* t : {&dk, &dv}) {
    if (std::string m = tma_alignment_problem(*t, map_batch, 2); !m.empty()) return unsupported(m);
  }
  why = encode_tma_maps({{&args->tm_dk, dk, 64}}, map_batch, p.head_dim, p.dtype);
  if (why.empty()) why = encode_tma_maps({{&args->tm_dv, dv, 64}}, map_batch, p.dim_v(), p.dtype);
  if (!why.empty()) return unsupported(why);

  const Layout l = layout(p);
  if (l.rows > INT32_MAX) return unsupported("more than 2^31 query rows");
  const int64_t sq = p.seqlen_q, sk = p.seqlen_k;
  auto clamp_window = [&](int64_t w) { return (w < 0 || w >= sq + sk) ? -1 : static_cast<int>(w); };
  args->dk = p.dk;
  args->dv = p.dv;
  args->dk_stride_batch = p.dk_str.batch;
  args->dk_stride_seq = p.dk_str.seq;
  args->dk_stride_head = p.dk_str.head;
  args->dv_stride_batch = p.dv_str.batch;
  args->dv_stride_seq = p.dv_str.seq;
  args->dv_stride_head = p.dv_str.head;
  args->batch = static_cast<int>(p.batch);
  args->seqlen_q = static_cast<int>(sq);
  args->seqlen_q_pad = static_cast<int>(l.sq_pad);
  args->seqlen_k = static_cast<int>(sk);
  args->heads_q = static_cast<int>(p.heads_q);
  args->heads_kv = static_cast<int>(p.heads_kv);
  args->group = static_cast<int>(p.heads_q / p.heads_kv);
  args->head_dim = static_cast<int>(p.head_dim);
  args->head_dim_v = static_cast<int>(p.dim_v());
  args->window_left = clamp_window(p.window_left);
  args->window_right = clamp_window(p.window_right);
  args->cu_seqlens_q = varlen ? p.cu_seqlens_q : nullptr;
  args->cu_seqlens_k = varlen ? p.cu_seqlens_k : nullptr;
  args->ws_head_rows = l.head_rows;
  args->scale = p.scale;
  // The score-mod kernel's scores are in natural units (score_mod.cuh).
  const bool score_mod = p.softcap > 0.0f || p.alibi_slopes != nullptr;
  args->scale_log2 = static_cast<float>((score_mod ? 1.0 : static_cast<double>(p.scale)) * 1.4426950408889634);
  args->softcap = p.softcap;
  args->cap_scale = p.softcap > 0.0f ? p.scale / p.softcap : 0.0f;
  args->alibi = p.alibi_slopes;
  args->alibi_batch_stride = p.alibi_batch_stride;
  return Status::Ok();
}

// How many kv heads the deterministic grid interleaves, as a power of two.
// More heads side by side shorten the chains of waiting key tiles, but every
// head in flight streams its own Q and dO (seqlen_q x head_dim x 4 bytes)
// through the L2: 4 heads while they total at most 8 MB, else 2 (measured
// over 2k-16k at head dims 64, 128, 256: 4 heads lost up to 20% where they
// held 32-64 MB, 2 heads lost up to 10% at short lengths;
// bench/sm90/NOTES.md). Without a right mask bound, where every key tile's
// chain starts at query tile 0, 8 heads while they fit the same 8 MB (short
// sequences: the chains are short and their start is most of their wait;
// with a bound the grid runs backwards and 8 heads measured worse).
// FLASHATTN_SM90_DET_INTERLEAVE_LOG2=0..4 overrides it (read once per
// process, for A/B runs).
int det_interleave_log2(const BwdParams& p, bool right_bound) {
  static const int forced = [] {
    const char* e = std::getenv("FLASHATTN_SM90_DET_INTERLEAVE_LOG2");
    return e != nullptr && e[0] >= '0' && e[0] <= '4' && e[1] == '\0' ? e[0] - '0' : -1;
  }();
  if (forced >= 0) return forced;
  const int64_t per_head = p.seqlen_q * (p.head_dim + p.dim_v()) * 2, l2_share = int64_t{8} << 20;
  if (!right_bound && 8 * per_head <= l2_share) return 3;
  return 4 * per_head <= l2_share ? 2 : 1;
}

}  // namespace

Status can_implement_bwd(const BwdParams& p) noexcept {
  try {
    BwdKernelArgs args{};
    return prepare(p, &args);
  } catch (...) {
    return Status::Error(ErrorCode::Internal, "sm90 backward: exception in can_implement_bwd");
  }
}

size_t bwd_workspace_bytes(const BwdParams& p) noexcept { return layout(p).total; }

Status run_backward(const BwdParams& p, void* workspace) noexcept {
  try {
    BwdKernelArgs args{};
    if (Status s = prepare(p, &args); !s.ok()) return s;
    if (workspace == nullptr) return unsupported("no workspace");
    const Layout l = layout(p);
    char* ws = static_cast<char*>(workspace);
    args.lse2 = reinterpret_cast<const float*>(ws + l.lse2);
    args.dsum = reinterpret_cast<const float*>(ws + l.dsum);
    args.dq_accum = reinterpret_cast<float*>(ws + l.dq);
    args.dq_order = reinterpret_cast<int*>(ws + l.order);
    args.deterministic = p.deterministic ? 1 : 0;
    const int block_n = bwd_block_n(tile_of(p));
    const int kv_tiles = static_cast<int>((p.seqlen_k + block_n - 1) / block_n);
    const bool reversed = p.deterministic && args.window_right >= 0;
    args.kv_tile_base = reversed ? kv_tiles - 1 : 0;
    args.kv_tile_step = reversed ? -1 : 1;
    static const int det_two_writers = env_switch("FLASHATTN_SM90_DET_TWO_WRITERS", 1);
    args.det_two_writers = p.deterministic ? det_two_writers : 0;
    // Deterministic mode: up to 2^det_interleave_log2 kv heads side by side
    // in the grid (BwdKernelArgs), at most heads_kv of them (a power of two;
    // when it does not divide heads_kv, the last group's CTAs past the last
    // head leave at once).
    args.heads_interleave_log2 = 0;
    if (p.deterministic) {
      const int most = det_interleave_log2(p, args.window_right >= 0);
      while (args.heads_interleave_log2 < most && (int64_t{2} << args.heads_interleave_log2) <= p.heads_kv) {
        ++args.heads_interleave_log2;
      }
    }

    BwdPrepArgs prep{};
    prep.o = p.out;
    prep.dout = p.dout;
    prep.o_sb = p.o_str.batch;
    prep.o_ss = p.o_str.seq;
    prep.o_sh = p.o_str.head;
    prep.do_sb = p.do_str.batch;
    prep.do_ss = p.do_str.seq;
    prep.do_sh = p.do_str.head;
    prep.lse = p.lse;
    prep.lse2 = reinterpret_cast<float*>(ws + l.lse2);
    prep.dsum = reinterpret_cast<float*>(ws + l.dsum);
    prep.dq_accum = args.dq_accum;
    prep.dq = p.dq;
    prep.dq_sb = p.dq_str.batch;
    prep.dq_ss = p.dq_str.seq;
    prep.dq_sh = p.dq_str.head;
    prep.batch = args.batch;
    prep.heads_q = args.heads_q;
    prep.seqlen_q = args.seqlen_q;
    prep.seqlen_q_pad = args.seqlen_q_pad;
    prep.cu_seqlens_q = args.cu_seqlens_q;
    prep.ws_head_rows = l.head_rows;
    prep.total_q = p.total_q;
    prep.lse_sh = p.lse_head_stride;
    prep.head_dim = tile_of(p);
    prep.block_m = block_m_of(p);
    prep.dq_stride = bwd_dq_stride(prep.head_dim, prep.block_m);
    prep.cols = static_cast<int>(p.head_dim);
    prep.cols_o = static_cast<int>(p.dim_v());
    prep.scale = p.scale;

    cudaStream_t stream = static_cast<cudaStream_t>(p.stream);
    // dispatch.cpp has made p.device_index current (DeviceGuard).
    if (p.varlen()) {
      return p.dtype == DType::BF16 ? launch_for_head_dim<__nv_bfloat16, true>(prep.head_dim, args, prep, stream)
                                    : launch_for_head_dim<__half, true>(prep.head_dim, args, prep, stream);
    }
    return p.dtype == DType::BF16 ? launch_for_head_dim<__nv_bfloat16, false>(prep.head_dim, args, prep, stream)
                                  : launch_for_head_dim<__half, false>(prep.head_dim, args, prep, stream);
  } catch (...) {
    return Status::Error(ErrorCode::Internal, "sm90 backward: exception in run_backward");
  }
}

}  // namespace flashattn::detail::cuda::sm90
