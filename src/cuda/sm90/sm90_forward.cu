// Host adapter of the Hopper forward: can_implement checks, TMA descriptors
// (tma_desc.hpp), dispatch to the per-(dtype, head dim) launchers in inst/.
#include "sm90_forward.hpp"

#include <cuda.h>
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_fp8.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <climits>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <numeric>
#include <string>

#include "fp8_v_transpose.hpp"
#include "kernel_args.hpp"
#include "launch.hpp"
#include "sm80/fwd_plan.hpp"
#include "sm80/launch_append.cuh"
#include "split_combine.cuh"
#include "split_kv.hpp"
#include "tile_rules.hpp"
#include "tma_desc.hpp"

namespace flashattn::detail::cuda::sm90 {
namespace {

Status unsupported(const std::string& m) {
  return Status::Error(ErrorCode::Unsupported, "sm90 forward: " + m);
}
Status invalid(const std::string& m) {
  return Status::Error(ErrorCode::InvalidArgument, m);
}

// Longest sequence the 32-bit index arithmetic of the kernel (mask bounds,
// TMA coordinates) handles without overflow.
constexpr int64_t kMaxSeqlen = int64_t(1) << 28;

// Longest seqlen_k for which the consumer warpgroups take turns (pingpong).
constexpr int64_t kPingpongMaxSeqlenK = 2048;

// The device's multiprocessors (0 when they cannot be read), from the
// per-device cache the sm80 path keeps: a call asks several times (tile
// shape, split count, workspace size).
int sm_count(int device) { return sm80::device_info_or_zero(device).sm_count; }

Status check_device(int device) {
  int major = 0, minor = 0;
  cudaError_t e1 = cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, device);
  cudaError_t e2 = cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, device);
  if (e1 != cudaSuccess || e2 != cudaSuccess) {
    (void)cudaGetLastError();
    return unsupported("cannot query CUDA device " + std::to_string(device));
  }
  if (major != 9 || minor != 0) {
    return unsupported("needs a compute capability 9.0 device (sm_90a code), device " +
                       std::to_string(device) + " is " + std::to_string(major) + "." +
                       std::to_string(minor));
  }
  return Status::Ok();
}

// FLASHATTN_<name>=0 or 1 as 0 or 1, else -1 (unset or anything else); the
// callers keep it in a static (read once per process).
int env_switch(const char* name) {
  const char* e = std::getenv(name);
  return e != nullptr && (e[0] == '0' || e[0] == '1') && e[1] == '\0' ? e[0] - '0' : -1;
}

// FLASHATTN_<name>=64, 128 or 192 (read once per process), else 0.
int forced_block_m(const char* name) {
  const char* e = std::getenv(name);
  const int v = e != nullptr ? std::atoi(e) : 0;
  return v == kSingleWGBlockM || v == 128 || v == 192 ? v : 0;
}
// The query rows FLASHATTN_SM90_HD64_BLOCKM / _HD128_BLOCKM force at tile head
// dim 64 / 128 (each read once per process), else 0.
int forced_tile_rows(int tile_d) {
  static const int forced64 = forced_block_m("FLASHATTN_SM90_HD64_BLOCKM");
  static const int forced128 = forced_block_m("FLASHATTN_SM90_HD128_BLOCKM");
  return tile_d == 64 ? forced64 : tile_d == 128 ? forced128 : 0;
}

// Query rows per tile: block_m_for's, except for short head_dim 64 and 128
// problems with a right mask bound (tile_rules.hpp, short_masked_tiles_pay;
// at head dim 128 the 128-row kernel is kNarrowBlockMHd128's), fp8 head_dim
// 128 (kernel_args.hpp), and softcap,
// which takes 128 rows at head dims 64 and 128 (two consumer warpgroups of
// 240 registers: with three of 160 its tanh spilled 76-92 bytes in the
// consumers, and launch.cuh builds the softcap kernels for 128 rows only),
// and ALiBi at head dim 128 (3-10% faster there than on 192 rows; at head
// dim 64 192 rows measured ~20% faster: bench/sm90/NOTES.md), and sequences
// of at most 128 query rows at head dims 64 and 128 (a KV-cache chunk, a
// short query: a 192-row tile would run a third warpgroup on empty rows;
// bench/NOTES.md, "KV cache on the Hopper forward"), and at head dim 128
// lengths the 128-row tile pads much less (256, 640 rows).
// FLASHATTN_SM90_HD64_BLOCKM and FLASHATTN_SM90_HD128_BLOCKM (16-bit) = 64, 128
// or 192 force one for A/B timing (bench/sm90/NOTES.md). 64 is the
// single-warpgroup tile (kSingleWGBlockM, kernel_args.hpp), taken only where
// `single_wg_ok` (16-bit padded calls without score modifiers, GQA packing
// or split-KV) and never by default: its gain at short causal calls was not
// shown beyond the noise (bench/sm90/NOTES.md, "The single-warpgroup tile").
// `tiles_per_row`: the (batch, head) pairs a query tile is repeated over;
// `sms`: the device's multiprocessors (the head-dim-128 choice counts waves);
// `uniform`: tiles of equal cost taken round robin (tile_rules.hpp).
static_assert(kShortMaskedBlockM == kNarrowBlockMHd128, "one 128-row kernel at head dim 128 (launch_16bit)");
int choose_block_m(DType dtype, int64_t head_dim, bool right_bounded, int64_t seqlen_q, int64_t seqlen_k, bool softcap,
                   bool alibi, int64_t tiles_per_row, int sms, bool uniform, bool single_wg_ok) {
  const int d = static_cast<int>(head_dim);
  if (dtype == DType::F8E4M3 && d == 128) return kFp8BlockMHd128;
  if ((softcap && d <= 128) || (alibi && d == 128)) return 128;
  if (d != 64 && d != 128) return block_m_for(d);
  const int forced = forced_tile_rows(d);
  if (single_wg_ok) return kSingleWGBlockM;  // forced to 64 where it can run (tile_shape)
  if (forced == 128 || forced == 192) return forced;
  if (short_masked_tiles_pay(d, right_bounded, seqlen_q, seqlen_k)) return kShortMaskedBlockM;
  if (d == 128) {
    if (seqlen_q <= kNarrowBlockMHd128) return kNarrowBlockMHd128;
    return hd128_narrow_tiles_pay(seqlen_q, tiles_per_row, sms, uniform) ? kNarrowBlockMHd128 : block_m_for(d);
  }
  return seqlen_q <= kShortMaskedBlockM ? kShortMaskedBlockM : block_m_for(d);
}

bool is_empty(const FwdParams& p) {
  return p.batch == 0 || p.seqlen_q == 0 || p.heads_q == 0;
}

// A window side of -1, or one wide enough to hide nothing, is unbounded (-1).
int clamp_window(int64_t w, int64_t sq, int64_t sk) {
  return (w < 0 || w >= sq + sk) ? -1 : static_cast<int>(w);
}

bool masked(const FwdParams& p) {
  return clamp_window(p.window_left, p.seqlen_q, p.seqlen_k) >= 0 ||
         clamp_window(p.window_right, p.seqlen_q, p.seqlen_k) >= 0;
}

// Masked (causal, windowed) problems claim their work tiles from a counter
// (tile_scheduler.cuh) kept in the workspace, after fp8's V^T.
// FLASHATTN_SM90_SCHEDULE=grid instead launches one CTA per masked tile and
// lets the hardware dispatch them (the schedule before the counter; read
// once per process, for A/B timing).
bool grid_schedule_forced() {
  static const bool forced = [] {
    const char* e = std::getenv("FLASHATTN_SM90_SCHEDULE");
    return e != nullptr && std::string(e) == "grid";
  }();
  return forced;
}
bool dynamic_schedule(const FwdParams& p) { return masked(p) && !grid_schedule_forced(); }
// FLASHATTN_SM90_FIRST_TILE_PARTIAL=0 keeps the partial query tile last (as
// before; for A/B runs, read once per process).
bool first_tile_partial_disabled() {
  static const bool off = [] {
    const char* e = std::getenv("FLASHATTN_SM90_FIRST_TILE_PARTIAL");
    return e != nullptr && std::string(e) == "0";
  }();
  return off;
}
// Paged caches: gather K/V by cp.async (paged_gather.cuh) instead of TMA
// boxes where tile_rules.hpp paged_gather_pays says so (small pages);
// FLASHATTN_SM90_PAGED_GATHER=0 / 1 never / always gathers (read once per
// process; for A/B runs).
bool kv_gather_for(int64_t page_size, int block_n) {
  static const int forced = env_switch("FLASHATTN_SM90_PAGED_GATHER");
  return forced >= 0 ? forced == 1 : paged_gather_pays(page_size, block_n);
}
constexpr size_t kCounterAlign = 256;
size_t counter_offset(const FwdParams& p) {
  const size_t vt = p.dtype == DType::F8E4M3 && p.seqlen_k > 0 ? fp8_vt_bytes(p) : 0;
  return (vt + kCounterAlign - 1) / kCounterAlign * kCounterAlign;
}

// GQA packing (tile_rules.hpp gqa_pack_heads; padded calls then run the
// per-sequence kernel too). FLASHATTN_SM90_PACK_GQA=0 turns it off (read
// once per process; for A/B runs). Returns the group, or 1.
int pack_heads_for(const FwdParams& p, int block_m) {
  static const bool off = [] {
    const char* e = std::getenv("FLASHATTN_SM90_PACK_GQA");
    return e != nullptr && std::string(e) == "0";
  }();
  return off ? 1
             : gqa_pack_heads(p.heads_q, p.heads_kv, p.seqlen_q, block_m, p.alibi_slopes != nullptr,
                              p.dtype == DType::F8E4M3);
}

// The tile of a call: its head dim, query rows and key rows.
struct TileShape {
  int tile_d, block_m, block_n;
  int pack_heads;    // GQA packing: the group's heads per tile row block (1: off)
  int64_t num_m;     // query tiles per (batch, tile head)
  int64_t heads;     // tile heads: heads_q, or heads_kv when packed
};
// The fp8 forward's tiles: 128 and 256 (FA3 has 64 / 96 / 192 too). Head dims
// below a tile run on it with the columns (and V^T rows) past head_dim
// zero-filled by TMA, as the 16-bit head dims between the tiles do.
constexpr int fp8_tile_head_dim(int64_t head_dim) { return head_dim <= 128 ? 128 : 256; }

TileShape tile_shape(const FwdParams& p) {
  TileShape t{};
  t.tile_d = p.dtype == DType::F8E4M3 ? fp8_tile_head_dim(p.head_dim) : fwd_tile_head_dim(std::max(p.head_dim, p.dim_v()));
  const int64_t sq = p.seqlen_q, sk = p.seqlen_k;
  const int sms = sm_count(p.device_index);
  // The single-warpgroup tile, where it is forced, runs plain padded calls
  // that would neither pack GQA groups on 128 rows nor split the keys
  // (launch.cuh builds no per-sequence kernel for it).
  const bool single_wg_ok = forced_tile_rows(t.tile_d) == kSingleWGBlockM && p.dtype != DType::F8E4M3 &&
                            !p.per_sequence() && p.softcap == 0.0f &&
                            p.alibi_slopes == nullptr && p.num_splits <= 1 && pack_heads_for(p, 128) == 1 &&
                            split_count((sq + kSingleWGBlockM - 1) / kSingleWGBlockM * p.heads_q * p.batch,
                                        (sk + fwd_block_n(t.tile_d, kSingleWGBlockM) - 1) /
                                            fwd_block_n(t.tile_d, kSingleWGBlockM),
                                        sms, p.num_splits) == 1;
  t.block_m = choose_block_m(p.dtype, t.tile_d, clamp_window(p.window_right, sq, sk) >= 0, sq, sk, p.softcap > 0.0f,
                             p.alibi_slopes != nullptr, p.heads_q * p.batch, sms, !masked(p) && !p.per_sequence(),
                             single_wg_ok);
  // The K (and V) boxes must be the kernel's key tile: the barrier waits for
  // kBlockN rows (fp8 has its own tile: a 16-bit head-dim-256 box of 80 rows
  // hung the first fp8 head-dim-256 kernel).
  t.block_n = p.dtype == DType::F8E4M3 ? kFp8BlockN : fwd_block_n(t.tile_d, t.block_m);
  t.pack_heads = pack_heads_for(p, t.block_m);
  const int64_t rows = t.block_m / t.pack_heads;  // query positions per tile
  t.num_m = (sq + rows - 1) / rows;
  t.heads = p.heads_q / t.pack_heads;
  return t;
}
// The split count of a call (split_kv.hpp; prepare's, and workspace sizing
// asks it without encoding the tensor maps). fp8 does not split.
int splits_of(const FwdParams& p, const TileShape& t, int sms) {
  if (p.dtype == DType::F8E4M3) return 1;
  return split_count(t.num_m * t.heads * p.batch, (p.seqlen_k + t.block_n - 1) / t.block_n, sms, p.num_splits);
}
static_assert(kMaxSplitPieces == sm80::kMaxSplits, "the KV-cache API clamps num_splits alike on both paths");

// Every check, then the kernel arguments (tensor maps included). `vt`: the
// fp8 forward's transposed V (workspace); null in can_implement, where its
// map is not encoded.
Status prepare(const FwdParams& p, const void* vt, KernelArgs* args) {
  const bool fp8 = p.dtype == DType::F8E4M3;
  if (p.dtype != DType::F16 && p.dtype != DType::BF16 && !fp8) {
    return unsupported("dtype must be fp16, bf16 or float8_e4m3");
  }
  if (fp8 && (p.head_dim % 16 != 0 || p.head_dim > 256)) {  // rows of e4m3 in whole 16-byte TMA units
    return unsupported("float8_e4m3 head_dim " + std::to_string(p.head_dim) +
                       " (the fp8 tiles take multiples of 16 up to 256, on the 128 or 256 tile)");
  }
  for (int64_t d : {p.head_dim, p.dim_v()}) {
    if (d <= 0 || d > 256 || d % 8 != 0) {
      return unsupported("head_dim " + std::to_string(d) +
                         " (the tiles take multiples of 8 up to 256: 64, 128, 192, 256 and those below them)");
    }
  }
  if (fp8 && p.dim_v() != p.head_dim) return unsupported("float8_e4m3 with v's own head_dim");
  // v with a head dim of its own runs on the tile of the wider one: the
  // narrower operand's columns past its head dim are outside its TMA map,
  // which fills them with zeros, and O's map (and the direct store) stop at
  // v's head dim.
  const TileShape shape = tile_shape(p);
  const int tile_d = shape.tile_d;
  if (fp8 && p.has_variants()) return unsupported("float8_e4m3 without ALiBi or dropout");
  if (fp8 && p.softcap != 0.0f) return unsupported("fp8 with softcap is not implemented");
  if (p.dropout_p > 0.0f) return unsupported("dropout runs on the sm80 kernels");
  if (!(p.softcap >= 0.0f) || !std::isfinite(p.softcap)) return unsupported("softcap must be finite and >= 0");
  if (!(p.scale > 0.0f) || !std::isfinite(p.scale)) {
    return unsupported("softmax scale must be positive and finite");
  }
  if (p.seqlen_q > kMaxSeqlen || p.seqlen_k > kMaxSeqlen) {
    return unsupported("sequence lengths above 2^28");
  }
  if (p.heads_kv <= 0 || p.heads_q % p.heads_kv != 0) {
    return invalid("k: heads_q must be a multiple of heads_kv");
  }
  // Varlen batches run here (packed rows, the kernel reads cu_seqlens), and
  // KV caches (the kernel reads cache_seqlens, leftpad and batch indices, or
  // a paged cache's block table).
  const bool kvcache = p.seqlens_k != nullptr;
  if (kvcache && (fp8 || p.seqlens_k_add > INT32_MAX)) return unsupported("KV cache: fp8 or 2^31 new tokens");
  const bool paged = p.block_table != nullptr;
  if (paged && (!kvcache || p.kv_entries <= 0 || p.page_size <= 0 || p.page_size % 16 != 0 ||
                p.kv_batch_idx != nullptr || p.leftpad_k != nullptr || p.block_table_stride > INT32_MAX)) {
    return unsupported("paged K/V: a KV-cache call with pages of a multiple of 16 rows, no leftpad or batch "
                       "indices");
  }
  if (fp8 && p.num_splits > 1) return unsupported("float8_e4m3 with split-KV");
  const bool varlen = p.varlen();
  if (varlen && (p.cu_seqlens_k == nullptr || p.total_q > INT32_MAX || p.total_k > INT32_MAX)) {
    return unsupported("varlen needs cu_seqlens_k and fewer than 2^31 packed rows");
  }
  if (Status s = check_device(p.device_index); !s.ok()) return s;
  if (is_empty(p)) return Status::Ok();

  const int64_t esize = tma_elem_bytes(p.dtype);
  // Varlen maps: [1, total rows, heads, head_dim] over the packed tensors;
  // a KV cache's K/V maps span its entries ([entries, capacity, heads_kv, d])
  // or its pages ([pages, page_size, heads_kv, d]).
  const int64_t map_batch = varlen ? 1 : p.batch;
  const int64_t kv_map_batch = kvcache && p.kv_entries > 0 ? p.kv_entries : map_batch;
  const int64_t rows_q = varlen ? p.total_q : p.seqlen_q;
  const int64_t rows_k = varlen ? p.total_k : paged ? p.page_size : p.seqlen_k;
  const TmaOperand q{"q", p.q, rows_q, p.heads_q, p.q_str};
  const TmaOperand o{"out", p.out, rows_q, p.heads_q, p.o_str};
  // With no keys there is nothing to load; the K/V maps then describe Q (never used).
  const bool no_keys = rows_k == 0;
  const TmaOperand k = no_keys ? TmaOperand{"k", p.q, rows_q, p.heads_q, p.q_str}
                            : TmaOperand{"k", p.k, rows_k, p.heads_kv, p.k_str};
  const TmaOperand v = no_keys ? TmaOperand{"v", p.q, rows_q, p.heads_q, p.q_str}
                            : TmaOperand{"v", p.v, rows_k, p.heads_kv, p.v_str};
  for (const TmaOperand* t : {&q, &k, &v}) {
    const int64_t b = t == &q || no_keys ? map_batch : kv_map_batch;
    if (std::string m = tma_alignment_problem(*t, b, esize); !m.empty()) return invalid(m);
  }
  if (std::string m = tma_alignment_problem(o, map_batch, 2); !m.empty()) return invalid(m);
  const int64_t sq = p.seqlen_q, sk = p.seqlen_k;
  const int block_m = shape.block_m, block_n = shape.block_n;
  const int64_t kv_b = no_keys ? map_batch : kv_map_batch;
  // A paged cache's K/V boxes: the largest row count dividing both the page
  // and the key tile (16 at least), so that each box lies in one page
  // (mainloop.cuh KeyPages); otherwise one box per key tile.
  const int kv_box_rows = paged && !no_keys ? static_cast<int>(std::gcd<int64_t>(p.page_size, block_n)) : block_n;
  std::string why = shape.pack_heads > 1 ? encode_tma_gqa_packed(&args->tm_q, q, map_batch, p.head_dim, p.dtype,
                                                                   shape.pack_heads, block_m)
                                         : encode_tma_maps({{&args->tm_q, q, block_m}}, map_batch, p.head_dim, p.dtype);
  if (why.empty()) why = encode_tma_maps({{&args->tm_k, k, kv_box_rows}}, kv_b, p.head_dim, p.dtype);
  if (why.empty()) why = encode_tma_maps({{&args->tm_o, o, 64}}, map_batch, p.dim_v(), out_dtype_for(p.dtype));
  if (why.empty() && !fp8) why = encode_tma_maps({{&args->tm_v, v, kv_box_rows}}, kv_b, p.dim_v(), p.dtype);
  if (why.empty() && fp8 && vt != nullptr) {
    // V^T [batch, heads_kv, head_dim, keys] (varlen: [1, heads_kv, head_dim,
    // keys], the sequences one after another): rows of keys, boxes of
    // kFp8VtBoxRows rows x 128 keys (fp8_v_transpose.hpp).
    const int64_t keys = no_keys ? kFp8VtKeyAlign : fp8_vt_row_keys(p);
    const TmaOperand vtop{"v (transposed)", vt, p.head_dim, p.heads_kv,
                          Strides{p.heads_kv * p.head_dim * keys, keys, p.head_dim * keys}};
    why = encode_tma_maps({{&args->tm_v, vtop, kFp8VtBoxRows}}, map_batch, keys, p.dtype);
  }
  if (!why.empty()) return unsupported(why);
  args->q_descale = p.q_descale;
  args->k_descale = p.k_descale;
  args->v_descale = p.v_descale;

  args->block_m = block_m;
  args->block_n = block_n;
  args->lse = p.lse;
  args->lse_batch_stride = p.lse_batch_stride;
  args->lse_head_stride = p.lse_head_stride;
  args->cu_seqlens_q = varlen ? p.cu_seqlens_q : nullptr;
  args->cu_seqlens_k = varlen ? p.cu_seqlens_k : nullptr;
  args->seqused_k = kvcache ? p.seqlens_k : nullptr;
  args->leftpad_k = kvcache ? p.leftpad_k : nullptr;
  args->kv_batch_idx = kvcache ? p.kv_batch_idx : nullptr;
  args->seqlens_k_add = kvcache ? static_cast<int>(p.seqlens_k_add) : 0;
  args->block_table = paged && !no_keys ? p.block_table : nullptr;
  args->bt_stride = paged ? static_cast<int>(p.block_table_stride) : 0;
  args->page_size = paged ? static_cast<int>(p.page_size) : 0;
  args->page_rows = kv_box_rows;
  args->kv_gather = args->block_table != nullptr && kv_gather_for(p.page_size, block_n) ? 1 : 0;
  args->head_dim_k = static_cast<int>(p.head_dim);
  args->k_base = static_cast<const char*>(p.k);
  args->v_base = static_cast<const char*>(p.v);
  args->k_page_bytes = p.k_str.batch * esize;
  args->k_row_bytes = p.k_str.seq * esize;
  args->k_head_bytes = p.k_str.head * esize;
  args->v_page_bytes = p.v_str.batch * esize;
  args->v_row_bytes = p.v_str.seq * esize;
  args->v_head_bytes = p.v_str.head * esize;
  args->out = p.out;
  args->o_stride_batch = p.o_str.batch;
  args->o_stride_seq = p.o_str.seq;
  args->o_stride_head = p.o_str.head;
  args->batch = static_cast<int>(p.batch);
  args->seqlen_q = static_cast<int>(sq);
  args->seqlen_k = static_cast<int>(sk);
  args->heads_q = static_cast<int>(p.heads_q);
  args->group = static_cast<int>(p.heads_q / p.heads_kv);
  args->head_dim = static_cast<int>(p.dim_v());
  args->window_left = clamp_window(p.window_left, sq, sk);
  args->window_right = clamp_window(p.window_right, sq, sk);
  const int64_t num_m = shape.num_m;
  const int64_t num_tiles = num_m * shape.heads * p.batch;
  args->pack_heads = shape.pack_heads;
  if (num_tiles > INT32_MAX) return unsupported("more than 2^31 query tiles");
  const int sms = sm_count(p.device_index);
  if (sms <= 0) return unsupported("cannot query the multiprocessor count");
  args->num_m_blocks = static_cast<int>(num_m);
  args->num_splits = splits_of(p, shape, sms);
  if (num_tiles * args->num_splits > INT32_MAX) return unsupported("more than 2^31 work tiles (num_splits)");
  args->num_tiles = static_cast<int>(num_tiles * args->num_splits);
  args->o_accum = args->lse_accum = nullptr;  // run_forward places them in the workspace
  // One persistent CTA per SM at most (two of the 64-row tile); masked problems claim their tiles
  // from args->tile_counter (set by run_forward), the others take them round
  // robin (tile_scheduler.cuh says why).
  // Pingpong pays (a little: +3% causal hdim 128 at seqlen 512-1024) where
  // a work tile has few key tiles and the two consumer warpgroups would
  // otherwise hit the tensor cores and the MUFU at the same time; at long
  // sequences and at head_dim 256 the intra-warpgroup overlap alone measured
  // as fast or faster (bench/sm90/NOTES.md). Knob for experiments: 0 never,
  // 1 always, 2 by head_dim and seqlen_k; at run time FLASHATTN_SM90_PINGPONG=0/1
  // overrides it (read once per process: A/B runs are one process per setting).
#ifndef FLASHATTN_SM90_PINGPONG
#define FLASHATTN_SM90_PINGPONG 2
#endif
  static const int pingpong_env = env_switch("FLASHATTN_SM90_PINGPONG");
  args->pingpong = pingpong_env >= 0                 ? pingpong_env
                   : FLASHATTN_SM90_PINGPONG == 2 ? (sk <= kPingpongMaxSeqlenK && tile_d <= 128 ? 1 : 0)
                                                  : FLASHATTN_SM90_PINGPONG;
  // Three consumer warpgroups: turns only in head dim 64's kernel of its own
  // (launch.cuh), by hd64_turns_pay; FLASHATTN_SM90_PINGPONG3=0/1 overrides
  // it (read once per process; A/B runs and tests).
  if (block_m / 64 == 3) {
    static const int turns3_env = env_switch("FLASHATTN_SM90_PINGPONG3");
    args->pingpong = tile_d == 64 && (turns3_env >= 0 ? turns3_env == 1 : hd64_turns_pay(masked(p), p.per_sequence(), sk));
  }
  args->grid_ctas = masked(p) && grid_schedule_forced()
                       ? args->num_tiles
                       : static_cast<int>(std::min<int64_t>(args->num_tiles, int64_t{sms} * fwd_ctas_per_sm(block_m)));
  args->tile_counter = nullptr;
  args->scale = p.scale;
  args->scale_log2 = static_cast<float>(static_cast<double>(p.scale) * 1.4426950408889634);
  args->softcap = p.softcap;
  args->cap_scale = p.softcap > 0.0f ? p.scale / p.softcap : 0.0f;
  args->alibi = p.alibi_slopes;
  args->alibi_batch_stride = p.alibi_batch_stride;
  args->longest_first = args->window_right >= 0 ? 1 : 0;
  // With a right mask bound a query tile's cost grows with its rows, so the
  // partial tile goes first, where its empty rows waste the fewest key tiles
  // (tile_scheduler.cuh WorkTile::row0; at 1k tokens causal on 192-row tiles
  // 32 -> 27 tile steps per head).
  args->first_tile_partial = args->window_right >= 0 && !first_tile_partial_disabled() ? 1 : 0;
  return Status::Ok();
}

class DeviceGuard {
 public:
  explicit DeviceGuard(int device) {
    if (cudaGetDevice(&prev_) == cudaSuccess && prev_ != device) {
      if (cudaSetDevice(device) == cudaSuccess) switched_ = true;
    }
  }
  ~DeviceGuard() {
    if (switched_) (void)cudaSetDevice(prev_);
  }
  DeviceGuard(const DeviceGuard&) = delete;
  DeviceGuard& operator=(const DeviceGuard&) = delete;

 private:
  int prev_ = 0;
  bool switched_ = false;
};

}  // namespace

bool packs_gqa(const FwdParams& p) noexcept {
  try {
    return tile_shape(p).pack_heads > 1;
  } catch (...) {
    return false;
  }
}

Status can_implement(const FwdParams& p) noexcept {
  try {
    KernelArgs args{};
    return prepare(p, nullptr, &args);
  } catch (...) {
    return Status::Error(ErrorCode::Internal, "sm90 forward: exception in can_implement");
  }
}

namespace {
// Workspace, in order: fp8's V^T, the masked problems' tile counter,
// split-KV's partial O and LSE (fp32), the KV cache's rotated copy of q
// (written by the append kernel, read by the TMA loads: contiguous
// [B, Sq, Hq, D]); each part 256-byte aligned.
struct Workspace {
  size_t counter = 0, o_accum = 0, lse_accum = 0, q_rot = 0, total = 0;
};
size_t align_up(size_t x) { return (x + kCounterAlign - 1) / kCounterAlign * kCounterAlign; }
Workspace workspace_layout(const FwdParams& p, int num_splits) {
  Workspace w;
  size_t end = 0;
  if (!is_empty(p)) {
    w.counter = counter_offset(p);
    end = dynamic_schedule(p) ? w.counter + sizeof(int) : w.counter;
    if (num_splits > 1) {
      const size_t rows = static_cast<size_t>(num_splits) * p.batch * p.heads_q * p.seqlen_q;
      w.o_accum = align_up(end);
      w.lse_accum = align_up(w.o_accum + rows * p.dim_v() * sizeof(float));
      end = w.lse_accum + rows * sizeof(float);
    }
  }
  const size_t rot = sm80::rotary_q_bytes(p);
  if (rot > 0) {
    w.q_rot = align_up(end);
    end = w.q_rot + rot;
  }
  w.total = end;
  return w;
}
// The split count prepare() chooses.
int num_splits_of(const FwdParams& p) {
  return is_empty(p) ? 1 : splits_of(p, tile_shape(p), sm_count(p.device_index));
}
}  // namespace

size_t workspace_bytes(const FwdParams& p) noexcept {
  try {
    return workspace_layout(p, num_splits_of(p)).total;
  } catch (...) {
    return 0;
  }
}

namespace {
// The 16-bit forward kernel of a tile head dim (launch.hpp: the inst/ files).
Status launch_16bit(const KernelArgs& args, int tile_d, bool bf16, cudaStream_t stream) {
  switch (tile_d) {
    case 64:
      if (args.block_m == kSingleWGBlockM) {
        return bf16 ? launch_fwd<__nv_bfloat16, 64, kSingleWGBlockM>(args, stream)
                    : launch_fwd<__half, 64, kSingleWGBlockM>(args, stream);
      }
      if (args.block_m == kShortMaskedBlockM) {
        return bf16 ? launch_fwd<__nv_bfloat16, 64, kShortMaskedBlockM>(args, stream)
                    : launch_fwd<__half, 64, kShortMaskedBlockM>(args, stream);
      }
      return bf16 ? launch_fwd<__nv_bfloat16, 64>(args, stream) : launch_fwd<__half, 64>(args, stream);
    case 128:
      if (args.block_m == kSingleWGBlockM) {
        return bf16 ? launch_fwd<__nv_bfloat16, 128, kSingleWGBlockM>(args, stream)
                    : launch_fwd<__half, 128, kSingleWGBlockM>(args, stream);
      }
      if (args.block_m == kNarrowBlockMHd128) {
        return bf16 ? launch_fwd<__nv_bfloat16, 128, kNarrowBlockMHd128>(args, stream)
                    : launch_fwd<__half, 128, kNarrowBlockMHd128>(args, stream);
      }
      return bf16 ? launch_fwd<__nv_bfloat16, 128>(args, stream)
                  : launch_fwd<__half, 128>(args, stream);
    case 192:
      return bf16 ? launch_fwd<__nv_bfloat16, 192>(args, stream)
                  : launch_fwd<__half, 192>(args, stream);
    case 256:
      return bf16 ? launch_fwd<__nv_bfloat16, 256>(args, stream)
                  : launch_fwd<__half, 256>(args, stream);
    default:
      return unsupported("head_dim " + std::to_string(tile_d));
  }
}

// Split-KV: split_combine.cuh merges the pieces' partial O / LSE into out
// and lse, launched with programmatic dependent launch (its
// griddepcontrol.wait holds its reads until the attention grid has finished).
template <class T>
Status launch_combine(const FwdParams& p, const KernelArgs& args, cudaStream_t stream) {
  SplitCombineArgs c{};
  c.o_accum = args.o_accum;
  c.lse_accum = args.lse_accum;
  c.out = p.out;
  c.o_sb = p.o_str.batch;
  c.o_ss = p.o_str.seq;
  c.o_sh = p.o_str.head;
  c.lse = p.lse;
  c.lse_sb = p.lse_batch_stride;
  c.lse_sh = p.lse_head_stride;
  c.cu_q = p.cu_seqlens_q;
  c.batch = static_cast<int>(p.batch);
  c.heads_q = static_cast<int>(p.heads_q);
  c.max_q = static_cast<int>(p.seqlen_q);
  c.d = static_cast<int>(p.dim_v());
  c.num_splits = args.num_splits;
  const int64_t rows = p.batch * p.heads_q * p.seqlen_q;
  cudaLaunchConfig_t cfg = {};
  cfg.gridDim = dim3(static_cast<unsigned>((rows + kCombineRowWarps - 1) / kCombineRowWarps));
  cfg.blockDim = dim3(kCombineRowWarps * 32);
  cfg.stream = stream;
  cudaLaunchAttribute pdl[1];
  pdl[0].id = cudaLaunchAttributeProgrammaticStreamSerialization;
  pdl[0].val.programmaticStreamSerializationAllowed = 1;
  cfg.attrs = pdl;
  cfg.numAttrs = 1;
  cudaError_t e = cudaLaunchKernelEx(&cfg, &split_combine_kernel<T>, c);
  if (e == cudaSuccess) e = cudaGetLastError();
  if (e != cudaSuccess) {
    return Status::Error(ErrorCode::CudaError, std::string("sm90 forward: combine launch: ") + cudaGetErrorString(e));
  }
  return Status::Ok();
}
}  // namespace

Status run_forward(const FwdParams& p, void* workspace) noexcept {
  try {
    const bool fp8 = p.dtype == DType::F8E4M3;
    if (workspace == nullptr && workspace_bytes(p) > 0) {
      return Status::Error(ErrorCode::Internal, "sm90 forward: no workspace given");
    }
    KernelArgs args{};
    // With no keys the V^T map is never used; any aligned pointer will do.
    const void* vt = workspace != nullptr ? workspace : p.q;
    // KV cache with rotary: the kernel reads q's rotated copy, which the
    // append kernel writes into the workspace (sm80/launch_append.cuh).
    FwdParams pr = p;
    void* q_rot = nullptr;
    const int splits = num_splits_of(p);
    const Workspace ws = workspace_layout(p, splits);
    uint8_t* const wsb = static_cast<uint8_t*>(workspace);
    if (sm80::rotary_q_bytes(p) > 0) {
      q_rot = wsb + ws.q_rot;
      pr.q = q_rot;
      pr.q_str = {p.seqlen_q * p.heads_q * p.head_dim, p.heads_q * p.head_dim, p.head_dim};
    }
    if (Status s = prepare(pr, fp8 ? vt : nullptr, &args); !s.ok()) return s;
    if (args.num_splits > 1) {
      if (args.num_splits != splits) return Status::Error(ErrorCode::Internal, "sm90 forward: split count changed");
      args.o_accum = reinterpret_cast<float*>(wsb + ws.o_accum);
      args.lse_accum = reinterpret_cast<float*>(wsb + ws.lse_accum);
    }
    DeviceGuard guard(p.device_index);
    cudaStream_t stream = static_cast<cudaStream_t>(p.stream);
    // KV cache: the new keys and values go into the cache first (also with
    // no query rows), on the call's stream.
    if (p.k_new != nullptr && p.batch > 0 && p.heads_kv > 0) {
      const Status s = p.dtype == DType::BF16 ? sm80::launch_append<__nv_bfloat16>(p, q_rot, stream)
                                              : sm80::launch_append<__half>(p, q_rot, stream);
      if (!s.ok()) return s;
    }
    if (is_empty(p)) return Status::Ok();
    if (dynamic_schedule(p)) {
      args.tile_counter = reinterpret_cast<int*>(wsb + ws.counter);
      const cudaError_t e = cudaMemsetAsync(args.tile_counter, 0, sizeof(int), stream);
      if (e != cudaSuccess) {
        return Status::Error(ErrorCode::CudaError,
                             std::string("sm90 forward: cudaMemsetAsync: ") + cudaGetErrorString(e));
      }
    }
    if (fp8) {
      if (counter_offset(p) > 0) {  // V^T holds keys
        if (Status s = launch_fp8_v_transpose(p, static_cast<uint8_t*>(workspace), stream); !s.ok()) {
          return s;
        }
      }
      return fp8_tile_head_dim(p.head_dim) == 128 ? launch_fwd<__nv_fp8_e4m3, 128, kFp8BlockMHd128>(args, stream)
                                                  : launch_fwd<__nv_fp8_e4m3, 256>(args, stream);
    }
    const bool bf16 = p.dtype == DType::BF16;
    const Status s = launch_16bit(args, fwd_tile_head_dim(std::max(p.head_dim, p.dim_v())), bf16, stream);
    if (!s.ok() || args.num_splits <= 1) return s;
    return bf16 ? launch_combine<__nv_bfloat16>(pr, args, stream) : launch_combine<__half>(pr, args, stream);
  } catch (...) {
    return Status::Error(ErrorCode::Internal, "sm90 forward: exception in run_forward");
  }
}

}  // namespace flashattn::detail::cuda::sm90
