// CUDA backend entry points (cuda_backend.hpp): argument checks this backend
// adds to src/api's, the (dtype, head dim) -> instantiation map, workspace
// management, and the device guard. Plain C++: kernels live in inst/*.cu.
#include <cuda_runtime_api.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <mutex>
#include <string>
#include <vector>

#include "common/elem.hpp"
#include "cuda/cuda_backend.hpp"
#include "common/device_info.hpp"
#include "cuda_check.hpp"
#include "head_dim_pad.hpp"
#include "sm80/kernel_traits.hpp"
#include "sm80/fwd_plan.hpp"
#include "common/sequence.hpp"
#include "f32/launch_f32.hpp"
#include "sm80/launch.hpp"
#ifdef FLASHATTN_WITH_SM90
#include "sm90/sm90_forward.hpp"
#endif
#ifdef FLASHATTN_WITH_SM90_BWD
#include "sm90/bwd_sm90.hpp"
#endif

namespace flashattn::detail::cuda {

cudaError_t probe_kernel_image();  // probe.cu

namespace {

Status unsupported(const std::string& m) { return Status::Error(ErrorCode::Unsupported, "CUDA backend: " + m); }
Status invalid(const std::string& m) { return Status::Error(ErrorCode::InvalidArgument, "CUDA backend: " + m); }

const char* built_hdims() {
  return ""
#ifdef FLASHATTN_CUDA_HDIM_64
         " 64"
#endif
#ifdef FLASHATTN_CUDA_HDIM_96
         " 96"
#endif
#ifdef FLASHATTN_CUDA_HDIM_128
         " 128"
#endif
#ifdef FLASHATTN_CUDA_HDIM_192
         " 192"
#endif
#ifdef FLASHATTN_CUDA_HDIM_256
         " 256"
#endif
      ;
}

using FwdFn = Status (*)(const FwdParams&, void*);
using BwdFn = Status (*)(const BwdParams&, void*);

#define FA_HDIM_CASE(D)                                                                  \
  case D:                                                                                \
    fwd = bf16 ? &sm80::run_fwd<kBF16, D> : &sm80::run_fwd<kF16, D>;                     \
    bwd = bf16 ? &sm80::run_bwd<kBF16, D> : &sm80::run_bwd<kF16, D>;                     \
    fwd_smem = sm80::FwdCfg<D>::smem();                                                  \
    bwd_smem = sm80::BwdCfg<D>::smem();                                                  \
    dq_smem = sm80::DqCfg<D>::smem();                                                    \
    return true;

// fp32 runs on its own kernels (src/cuda/f32: CUDA cores, exact fp32) at
// tile head dims 64, 128 and 256, always built.
#define FA_F32_CASE(D)                  \
  case D:                               \
    fwd = &f32::run_fwd<D>;             \
    bwd = &f32::run_bwd<D>;             \
    fwd_smem = f32::fwd_smem(D);        \
    bwd_smem = f32::bwd_smem(D);        \
    return true;

// The tile head dim a (dtype, head dim) runs on.
int tile_for(DType dtype, int64_t head_dim) {
  return dtype == DType::F32 ? f32::tile_head_dim(head_dim) : sm80::tile_head_dim(head_dim);
}

// The kernels a (dtype, tile head dim) runs on; false when not built.
struct Kernels {
  FwdFn fwd = nullptr;
  BwdFn bwd = nullptr;
  size_t fwd_smem = 0, bwd_smem = 0, dq_smem = 0;
  bool find(DType dtype, int tile) {
    if (dtype == DType::F32) {
      switch (tile) {
        FA_F32_CASE(64)
        FA_F32_CASE(128)
        FA_F32_CASE(256)
        default:
          return false;
      }
    }
    const bool bf16 = dtype == DType::BF16;
    switch (tile) {
#ifdef FLASHATTN_CUDA_HDIM_64
      FA_HDIM_CASE(64)
#endif
#ifdef FLASHATTN_CUDA_HDIM_96
      FA_HDIM_CASE(96)
#endif
#ifdef FLASHATTN_CUDA_HDIM_128
      FA_HDIM_CASE(128)
#endif
#ifdef FLASHATTN_CUDA_HDIM_192
      FA_HDIM_CASE(192)
#endif
#ifdef FLASHATTN_CUDA_HDIM_256
      FA_HDIM_CASE(256)
#endif
      default:
        return false;
    }
  }
};
#undef FA_HDIM_CASE
#undef FA_F32_CASE

// 16-byte vector loads and cp.async need the base pointer and every stride
// that is actually stepped (dimension of size > 1) to be 16-byte multiples.
Status check_alignment(const char* name, const void* ptr, const Strides& s, int64_t batch, int64_t seqlen,
                       int64_t heads, DType dtype) {
  const int64_t kElems = 16 / int64_t(head_dim_pad::impl::elem_bytes(dtype));  // elements in 16 bytes
  if (reinterpret_cast<uintptr_t>(ptr) % 16 != 0)
    return invalid(std::string(name) + " must be 16-byte aligned (its data pointer is not)");
  struct {
    const char* what;
    int64_t stride, extent;
  } dims[] = {{"batch", s.batch, batch}, {"seqlen", s.seq, seqlen}, {"heads", s.head, heads}};
  for (const auto& d : dims) {
    if (d.extent > 1 && d.stride % kElems != 0)
      return invalid(std::string(name) + " " + d.what + " stride " + std::to_string(d.stride) +
                     " elements: must be a multiple of " + std::to_string(kElems) + " elements (16 bytes)");
  }
  return Status::Ok();
}

Status check_device(int device, size_t smem_needed, const char* what) {
  // Device count and properties are cached per device (common/device_info.hpp),
  // and so is a passed probe: no driver round trips after a device's first call.
  int count = 0;
  cudaError_t e = cached_device_count(&count);
  if (e != cudaSuccess) {
    cudaGetLastError();
    return cuda_error("cudaGetDeviceCount", e);
  }
  if (device < 0 || device >= count)
    return invalid("device_index " + std::to_string(device) + " but " + std::to_string(count) +
                   " CUDA device(s) are visible");
  const DeviceInfo* info = device_info(device, &e);
  if (info == nullptr) return cuda_error("cudaDeviceGetAttribute", e);
  const int major = info->major, minor = info->minor, optin = info->smem_optin;
  if (major < 8)
    return unsupported("needs compute capability 8.0 or newer; device " + std::to_string(device) + " is sm_" +
                       std::to_string(major) + std::to_string(minor));
  static std::atomic<bool> probed[64];
  if (device >= 64 || !probed[device].load(std::memory_order_acquire)) {
    e = probe_kernel_image();
    if (e != cudaSuccess) {
      cudaGetLastError();
      return unsupported("this build has no kernels for sm_" + std::to_string(major) + std::to_string(minor) +
                         " (add it to FLASHATTN_CUDA_ARCHS): " + cudaGetErrorString(e));
    }
    if (device < 64) probed[device].store(true, std::memory_order_release);
  }
  if (smem_needed > static_cast<size_t>(optin))
    return unsupported(std::string(what) + " needs " + std::to_string(smem_needed) +
                       " bytes of shared memory per block; device " + std::to_string(device) + " allows " +
                       std::to_string(optin));
  return Status::Ok();
}

// Checks that need no device; fills `k` with the kernels to run.
Status check_params(const AttnParams& p, Kernels& k) {
  if (p.dtype != DType::F16 && p.dtype != DType::BF16 && p.dtype != DType::F32) return unsupported("unknown dtype");
  if (p.head_dim <= 0 || p.head_dim % 8 != 0 || p.head_dim > 256)
    return unsupported("head_dim " + std::to_string(p.head_dim) + ": supported are multiples of 8 up to 256");
  const int tile = tile_for(p.dtype, p.head_dim);
  if (!k.find(p.dtype, tile))
    return unsupported("head_dim " + std::to_string(p.head_dim) + " runs on the head-dim-" + std::to_string(tile) +
                       " kernels, which this build left out (FLASHATTN_HDIMS; built:" + built_hdims() + ")");
  if (!(p.scale > 0.f) || !std::isfinite(p.scale))
    return unsupported("softmax_scale must be positive and finite (got " + std::to_string(p.scale) + ")");
  if (!(p.softcap >= 0.f) || !std::isfinite(p.softcap))
    return invalid("softcap must be >= 0 and finite (got " + std::to_string(p.softcap) + ")");
  if (p.batch > 65535 || p.heads_q > 65535 || p.heads_kv > 65535)
    return unsupported("batch and heads must be at most 65535");
  constexpr int64_t kMaxSeq = (int64_t{1} << 31) - 1024;
  if (p.seqlen_q > kMaxSeq || p.seqlen_k > kMaxSeq) return unsupported("sequence lengths must be below 2^31 - 1024");
  Status s = check_alignment("q", p.q, p.q_str, p.batch, p.seqlen_q, p.heads_q, p.dtype);
  if (s.ok()) s = check_alignment("k", p.k, p.k_str, p.batch, p.seqlen_k, p.heads_kv, p.dtype);
  if (s.ok()) s = check_alignment("v", p.v, p.v_str, p.batch, p.seqlen_k, p.heads_kv, p.dtype);
  return s;
}

// The default pool's release threshold is 0: at every synchronisation it
// hands freed memory back to the driver, and the next cudaMallocAsync maps it
// again (~0.1 ms; measured on the H200 as a 0.19 ms floor per KV-cache decode
// call with a split-KV workspace). Keeping up to 256 MiB cached in the pool
// makes the per-call workspace nearly free. Raised once per device, and only
// when still at the default 0 (a caller's own setting wins).
void keep_pool_memory(int device) {
  static std::once_flag once[64];
  if (device < 0 || device >= 64) return;
  std::call_once(once[device], [device] {
    cudaMemPool_t pool;
    if (cudaDeviceGetDefaultMemPool(&pool, device) != cudaSuccess) {
      cudaGetLastError();
      return;
    }
    uint64_t threshold = 0;
    if (cudaMemPoolGetAttribute(pool, cudaMemPoolAttrReleaseThreshold, &threshold) == cudaSuccess &&
        threshold == 0) {
      threshold = uint64_t{256} << 20;
      cudaMemPoolSetAttribute(pool, cudaMemPoolAttrReleaseThreshold, &threshold);
    }
    cudaGetLastError();
  });
}

// Device memory for the call, freed in stream order.
class Workspace {
 public:
  Workspace() = default;
  Workspace(const Workspace&) = delete;
  Workspace& operator=(const Workspace&) = delete;
  Status alloc(size_t bytes, int device, cudaStream_t stream) {
    if (bytes == 0) return Status::Ok();
    cudaError_t e = cudaSuccess;
    const DeviceInfo* info = device_info(device, &e);
    if (info == nullptr) return cuda_error("cudaDeviceGetAttribute(cudaDevAttrMemoryPoolsSupported)", e);
    async_ = info->mem_pools;
    stream_ = stream;
    if (async_) {
      keep_pool_memory(device);
      FA_CUDA_TRY(cudaMallocAsync(&ptr_, bytes, stream));
    } else {
      FA_CUDA_TRY(cudaMalloc(&ptr_, bytes));
    }
    return Status::Ok();
  }
  Status release() {
    if (ptr_ == nullptr) return Status::Ok();
    void* p = ptr_;
    ptr_ = nullptr;
    if (async_) {
      FA_CUDA_TRY(cudaFreeAsync(p, stream_));
    } else {
      FA_CUDA_TRY(cudaStreamSynchronize(stream_));
      FA_CUDA_TRY(cudaFree(p));
    }
    return Status::Ok();
  }
  ~Workspace() { release(); }
  void* get() const { return ptr_; }

 private:
  void* ptr_ = nullptr;
  bool async_ = false;
  cudaStream_t stream_ = nullptr;
};

// run(workspace) with `bytes` of call workspace on p's device and stream,
// released in stream order afterwards; the first error wins.
template <class P, class Run>
Status with_workspace(const P& p, size_t bytes, Run run) {
  Workspace ws;
  Status s = ws.alloc(bytes, p.device_index, static_cast<cudaStream_t>(p.stream));
  if (!s.ok()) return s;
  s = run(ws.get());
  const Status r = ws.release();
  return s.ok() ? r : s;
}

// Device memory and row copies for common/head_dim_pad.hpp (v with a head
// dim of its own, head dims not a multiple of 8), on the call's stream.
class PadOps {
 public:
  PadOps(int device, cudaStream_t stream) : device_(device), stream_(stream) {}
  // A tensor whose rows can be whole 16-byte chunks (the unit every CUDA
  // kernel here loads and stores) is held to the kernels' alignment rule, as
  // on the calls that need no copy; rows of a head dim that is not a multiple
  // of 8 cannot be, and the copy kernel moves them in smaller chunks (down to
  // the element).
  Status check(const head_dim_pad::Rows& t, size_t es) {
    const DType dt = es == 4 ? DType::F32 : es == 2 ? DType::BF16 : DType::F8E4M3;
    if ((size_t(t.cols) * es) % 16 == 0) return check_alignment(t.name, t.ptr, t.str, t.n0, t.n1, t.heads, dt);
    if (reinterpret_cast<uintptr_t>(t.ptr) % es != 0)
      return invalid(std::string(t.name) + " must be aligned to its element size (its data pointer is not)");
    return Status::Ok();
  }
  Status alloc(size_t bytes, void** base) {
    Status s = ws_.alloc(bytes, device_, stream_);
    *base = ws_.get();
    return s;
  }
  Status pad(const head_dim_pad::Rows& src, void* dst, int64_t width, size_t es) {
    FA_CUDA_TRY(launch_pad_rows(src, dst, width, es, stream_));
    return Status::Ok();
  }
  Status crop(const void* src, int64_t width, const head_dim_pad::Rows& dst, size_t es) {
    FA_CUDA_TRY(launch_crop_rows(src, width, dst, es, stream_));
    return Status::Ok();
  }
  Status release() { return ws_.release(); }

 private:
  int device_;
  cudaStream_t stream_;
  Workspace ws_;
};

// run(params with one head dim) on zero-padded copies (head_dim_pad.hpp).
template <class Params, class Run>
Status with_padded_head_dims(const Params& p, Run run) {
  DeviceGuard guard;
  Status s = guard.enter(p.device_index);
  if (!s.ok()) return s;
  PadOps ops(p.device_index, static_cast<cudaStream_t>(p.stream));
  s = head_dim_pad::call(p, ops, run);
  const Status r = ops.release();
  return s.ok() ? r : s;
}

#ifdef FLASHATTN_WITH_SM90
// A KV-cache call (chunked prefill, speculative decoding) runs on the Hopper
// forward unless the sm80 plan runs 16-row decode tiles (seqlen_q x group <=
// 64), or packs a GQA group's query rows into one tile (fwd_plan.hpp:
// seqlen_q x group <= 128 rows with a group) where the Hopper forward would
// not (sm90::packs_gqa): one K/V load then serves the whole group. Measured with 32 / 8 heads (bench/NOTES.md,
// "KV cache on the Hopper forward"): chunks of 16 and 32 (packed) were
// faster on the sm80 path at 3 of 4 shapes each, chunks of 48 (not packed)
// 2.1-2.8x faster on the Hopper forward. FLASHATTN_SM90_KVCACHE_MIN_Q=n
// (read once per process) instead sends chunks of n rows and more to it,
// for A/B runs. Paged caches follow the same rule (their tiles load a box
// per page piece: sm90/mainloop.cuh KeyPages).
bool kvcache_fills_sm90_tiles(const FwdParams& p) {
  static const int64_t forced_min_q = [] {
    const char* e = std::getenv("FLASHATTN_SM90_KVCACHE_MIN_Q");
    return e != nullptr && std::atoll(e) > 0 ? std::atoll(e) : 0;
  }();
  if (forced_min_q > 0) return p.seqlen_q >= forced_min_q;
  const sm80::FwdPlan f =
      sm80::fwd_plan(p, sm80::sm_count(p.device_index), sm80::FwdCfg<128>::BM, sm80::FwdCfg<128>::BN);
  return !f.decode && (f.pack == 1 || sm90::packs_gqa(p));
}

// The Hopper forward takes what it can (sm_90 devices; fp16/bf16, softcap
// included, and fp8; 16-bit head dims that are multiples of 8 up to 256 on the
// 64/128/192/256 tiles, fp8 multiples of 16 up to 256 on the 128 and 256
// tiles) and everything else runs on the
// sm80 kernels.
// FLASHATTN_DISABLE_SM90=1 forces the sm80 path, so that it can be tested on
// a Hopper GPU too.
bool use_sm90(const FwdParams& p) {
  static const bool disabled = [] {
    const char* e = std::getenv("FLASHATTN_DISABLE_SM90");
    return e != nullptr && e[0] != '\0' && e[0] != '0';
  }();
  // The Hopper forward takes varlen batches, softcap, ALiBi and KV caches,
  // contiguous or paged (sm90::can_implement says), and no dropout:
  // that runs on the sm80 kernels (sm80/variants.cuh). fp32 it refuses (its
  // can_implement takes fp16, bf16 and fp8): that goes to src/cuda/f32.
  return !disabled && !(p.dropout_p > 0.0f) && (p.seqlens_k == nullptr || kvcache_fills_sm90_tiles(p)) &&
         sm90::can_implement(p).ok();
}
#endif

#ifdef FLASHATTN_WITH_SM90_BWD
// The Hopper backward likewise (multiples of 8 up to 256 on the 64/128/192/256 tiles, fp16/bf16, softcap
// and ALiBi too, padded or varlen batches, no dropout: sm90::can_implement_bwd);
// deterministic=true orders its dQ additions by key tile
// (sm90/bwd_kernel.cuh, bwd_dq_writer).
bool use_sm90_bwd(const BwdParams& p) {
  static const bool disabled = [] {
    const char* e = std::getenv("FLASHATTN_DISABLE_SM90");
    return e != nullptr && e[0] != '\0' && e[0] != '0';
  }();
  return !disabled && !(p.dropout_p > 0.0f) && sm90::can_implement_bwd(p).ok();
}

// The Hopper backward with its workspace (LSE/D rows, fp32 dQ accumulator,
// deterministic counters; sm90/bwd_sm90.cu).
Status run_sm90_backward(const BwdParams& p) {
  return with_workspace(p, sm90::bwd_workspace_bytes(p), [&](void* ws) { return sm90::run_backward(p, ws); });
}
#endif

#ifdef FLASHATTN_WITH_SM90
// The Hopper forward with its workspace (fp8's V^T, masked problems' tile
// counter; sm90_forward.hpp).
Status run_sm90_forward(const FwdParams& p) {
  return with_workspace(p, sm90::workspace_bytes(p), [&](void* ws) { return sm90::run_forward(p, ws); });
}
#endif

// v with a head dim of its own: the Hopper forward and backward take it as
// it is (their TMA maps bound each operand by its own head dim); every other
// path runs on zero-padded copies (head_dim_pad.hpp), as does every path for
// a head dim that is not a whole number of 16-byte chunks (e.g. 100).
bool pads_head_dims(const FwdParams& p) {
  if (!head_dim_pad::needed(p)) return false;
#ifdef FLASHATTN_WITH_SM90
  if (head_dim_pad::aligned(p) && use_sm90(p)) return false;
#endif
  return true;
}
bool pads_head_dims(const BwdParams& p) {
  if (!head_dim_pad::needed(p)) return false;
#ifdef FLASHATTN_WITH_SM90_BWD
  if (head_dim_pad::aligned(p) && use_sm90_bwd(p)) return false;
#endif
  return true;
}

// fp8 (e4m3) inputs: the Hopper forward only (no sm80 fallback, and
// FLASHATTN_DISABLE_SM90 does not apply).
Status forward_fp8(const FwdParams& p) {
#ifdef FLASHATTN_WITH_SM90
  DeviceGuard guard;
  Status s = guard.enter(p.device_index);
  if (!s.ok()) return s;
  s = sm90::can_implement(p);
  if (!s.ok()) return s;
  return run_sm90_forward(p);
#else
  (void)p;
  return unsupported("float8_e4m3 inputs run on the Hopper (sm_90a) forward, which this build left out "
                     "(FLASHATTN_CUDA_ARCHS without 90a)");
#endif
}

}  // namespace

Status can_implement(const AttnParams& call) noexcept {
  // fp8 has its own complete check in forward() (sm90::can_implement) before
  // anything is written.
  if (call.dtype == DType::F8E4M3) return Status::Ok();
  try {
    // A head dim that is not a multiple of 8 reaches the kernels at the padded
    // width, on the workspace copies' contiguous rows: the shape the padding
    // plans (head_dim_pad.hpp; no workspace here, so null pointers).
    AttnParams p = call;
    if (!head_dim_pad::aligned(call)) {
      FwdParams f;
      static_cast<AttnParams&>(f) = call;
      size_t bytes = 0;
      p = head_dim_pad::padded_shape(f, &bytes);
    }
    Kernels k;
    Status s = check_params(p, k);
    if (!s.ok()) return s;
    DeviceGuard guard;
    s = guard.enter(p.device_index);
    if (!s.ok()) return s;
    return check_device(p.device_index, k.fwd_smem, "the forward");
  } catch (...) {
    return Status::Error(ErrorCode::Internal, "CUDA backend: unexpected exception in can_implement");
  }
}

Status forward(const FwdParams& p) noexcept {
  try {
    if (pads_head_dims(p)) return with_padded_head_dims(p, [](const FwdParams& w) { return forward(w); });
    if (p.dtype == DType::F8E4M3) return forward_fp8(p);
    Kernels k;
    Status s = check_params(p, k);
    if (!s.ok()) return s;
    s = check_alignment("out", p.out, p.o_str, p.batch, p.seqlen_q, p.heads_q, p.dtype);
    if (s.ok() && p.k_new != nullptr) {
      s = check_alignment("k_new", p.k_new, p.knew_str, p.batch, p.seqlens_k_add, p.heads_kv, p.dtype);
      if (s.ok()) s = check_alignment("v_new", p.v_new, p.vnew_str, p.batch, p.seqlens_k_add, p.heads_kv, p.dtype);
    }
    // Varlen: the kernels step the packed rows of every sequence, so the row
    // strides must allow 16-byte loads whenever a packed tensor holds two rows
    // (backward_varlen says more).
    if (s.ok() && p.varlen()) {
      const int64_t rows_q = std::max(p.seqlen_q, p.total_q), rows_k = std::max(p.seqlen_k, p.batch);
      s = check_alignment("q", p.q, p.q_str, p.batch, rows_q, p.heads_q, p.dtype);
      if (s.ok()) s = check_alignment("out", p.out, p.o_str, p.batch, rows_q, p.heads_q, p.dtype);
      if (s.ok()) s = check_alignment("k", p.k, p.k_str, p.batch, rows_k, p.heads_kv, p.dtype);
      if (s.ok()) s = check_alignment("v", p.v, p.v_str, p.batch, rows_k, p.heads_kv, p.dtype);
    }
    // The append kernel rotates whole 16-byte chunks (sm80/append_kernel.cuh).
    if (s.ok() && p.rotary_cos != nullptr && p.rotary_dim % 16 != 0)
      s = unsupported("rotary_dim " + std::to_string(p.rotary_dim) + ": the CUDA backend rotates multiples of 16 "
                      "(rotary_cos / rotary_sin of shape [seqlen_ro, rotary_dim / 2])");
    if (!s.ok()) return s;
    DeviceGuard guard;
    s = guard.enter(p.device_index);
    if (!s.ok()) return s;
#ifdef FLASHATTN_WITH_SM90
    if (use_sm90(p)) return run_sm90_forward(p);
#endif
    s = check_device(p.device_index, k.fwd_smem, "the forward");
    if (!s.ok()) return s;
    // Split-KV partial results (sm80/fwd_plan.hpp); none for most shapes.
    return with_workspace(p, forward_workspace_bytes(p), [&](void* ws) { return k.fwd(p, ws); });
  } catch (...) {
    return Status::Error(ErrorCode::Internal, "CUDA backend: unexpected exception in forward");
  }
}

namespace {

Status backward_padded(const BwdParams& p) {
  {
    Kernels k;
    Status s = check_params(p, k);
    if (!s.ok()) return s;
    s = check_alignment("out", p.out, p.o_str, p.batch, p.seqlen_q, p.heads_q, p.dtype);
    if (s.ok()) s = check_alignment("dout", p.dout, p.do_str, p.batch, p.seqlen_q, p.heads_q, p.dtype);
    if (s.ok()) s = check_alignment("dq", p.dq, p.dq_str, p.batch, p.seqlen_q, p.heads_q, p.dtype);
    if (s.ok()) s = check_alignment("dk", p.dk, p.dk_str, p.batch, p.seqlen_k, p.heads_kv, p.dtype);
    if (s.ok()) s = check_alignment("dv", p.dv, p.dv_str, p.batch, p.seqlen_k, p.heads_kv, p.dtype);
    if (!s.ok()) return s;
    DeviceGuard guard;
    s = guard.enter(p.device_index);
    if (!s.ok()) return s;
#ifdef FLASHATTN_WITH_SM90_BWD
    if (use_sm90_bwd(p)) return run_sm90_backward(p);
#endif
    size_t smem = k.bwd_smem;
    if (p.deterministic && k.dq_smem > smem) smem = k.dq_smem;
    s = check_device(p.device_index, smem, "the backward");
    if (!s.ok()) return s;
    return with_workspace(p, backward_workspace_bytes(p), [&](void* ws) { return k.bwd(p, ws); });
  }
}

// Varlen backward: the sm80 kernels read cu_seqlens on the device (each
// block its own sequence's offsets; sm80/bwd_seq.cuh), so one launch of each
// backward kernel covers the packed batch: no host copy of the offsets, no
// synchronisation (graph-capturable, like the varlen forward), no
// per-sequence loop. The LSE stays in its packed [Hq, total_q] layout, and
// the D / dQ-accumulator workspaces use the same rows. On Hopper the sm90
// backward takes varlen batches the same way (its CTAs read cu_seqlens;
// sm90/bwd_seq.cuh), where it takes the padded batch.
Status backward_varlen(const BwdParams& p) {
  // Everything checkable up front, so that an unsupported call writes nothing.
  Kernels k;
  Status s = check_params(p, k);
  if (s.ok()) s = check_alignment("out", p.out, p.o_str, p.batch, p.seqlen_q, p.heads_q, p.dtype);
  if (s.ok()) s = check_alignment("dout", p.dout, p.do_str, p.batch, p.seqlen_q, p.heads_q, p.dtype);
  if (s.ok()) s = check_alignment("dq", p.dq, p.dq_str, p.batch, p.seqlen_q, p.heads_q, p.dtype);
  if (s.ok()) s = check_alignment("dk", p.dk, p.dk_str, p.batch, p.seqlen_k, p.heads_kv, p.dtype);
  if (s.ok()) s = check_alignment("dv", p.dv, p.dv_str, p.batch, p.seqlen_k, p.heads_kv, p.dtype);
  // The kernels step the packed rows of every sequence, not only the rows of
  // the longest one: the row strides must allow 16-byte loads whenever the
  // packed tensor can hold two rows (a sequence's first row is at
  // cu_seqlens[b] * stride). q's side has total_q rows; k's side at least
  // max_seqlen_k, and up to one row per sequence when that is 1.
  const int64_t rows_q = std::max(p.seqlen_q, p.total_q), rows_k = std::max(p.seqlen_k, p.batch);
  if (s.ok()) s = check_alignment("q", p.q, p.q_str, p.batch, rows_q, p.heads_q, p.dtype);
  if (s.ok()) s = check_alignment("out", p.out, p.o_str, p.batch, rows_q, p.heads_q, p.dtype);
  if (s.ok()) s = check_alignment("dout", p.dout, p.do_str, p.batch, rows_q, p.heads_q, p.dtype);
  if (s.ok()) s = check_alignment("dq", p.dq, p.dq_str, p.batch, rows_q, p.heads_q, p.dtype);
  if (s.ok()) s = check_alignment("k", p.k, p.k_str, p.batch, rows_k, p.heads_kv, p.dtype);
  if (s.ok()) s = check_alignment("v", p.v, p.v_str, p.batch, rows_k, p.heads_kv, p.dtype);
  if (s.ok()) s = check_alignment("dk", p.dk, p.dk_str, p.batch, rows_k, p.heads_kv, p.dtype);
  if (s.ok()) s = check_alignment("dv", p.dv, p.dv_str, p.batch, rows_k, p.heads_kv, p.dtype);
  if (!s.ok()) return s;
  DeviceGuard guard;
  s = guard.enter(p.device_index);
  if (!s.ok()) return s;
#ifdef FLASHATTN_WITH_SM90_BWD
  if (use_sm90_bwd(p)) return run_sm90_backward(p);
#endif
  s = check_device(p.device_index, std::max(k.bwd_smem, k.dq_smem), "the backward");
  if (!s.ok()) return s;
  return with_workspace(p, backward_workspace_bytes(p), [&](void* ws) { return k.bwd(p, ws); });
}

}  // namespace

Status backward(const BwdParams& p) noexcept {
  try {
    if (pads_head_dims(p)) return with_padded_head_dims(p, [](const BwdParams& w) { return backward(w); });
    return p.varlen() ? backward_varlen(p) : backward_padded(p);
  } catch (...) {
    return Status::Error(ErrorCode::Internal, "CUDA backend: unexpected exception in backward");
  }
}

size_t forward_workspace_bytes(const FwdParams& p) noexcept {
  if (pads_head_dims(p)) {
    size_t pad = 0;
    const FwdParams w = head_dim_pad::padded_shape(p, &pad);
    return pad + forward_workspace_bytes(w);
  }
  if (p.dtype == DType::F32) return f32::fwd_workspace_bytes(p);
#ifdef FLASHATTN_WITH_SM90
  if (p.dtype == DType::F8E4M3 || use_sm90(p)) return sm90::workspace_bytes(p);
#endif
  if (p.dtype == DType::F8E4M3) return 0;
  if (p.batch == 0 || p.heads_q == 0 || p.seqlen_q == 0) return 0;
  const int tile = sm80::tile_head_dim(p.head_dim);
  if (tile == 0) return 0;
  // Every head dim's forward uses the same tile rows and key-tile width.
  return sm80::fwd_workspace_total(
      p, sm80::fwd_plan(p, sm80::sm_count(p.device_index), sm80::FwdCfg<128>::BM, sm80::FwdCfg<128>::BN));
}

size_t backward_workspace_bytes(const BwdParams& p) noexcept {
  if (pads_head_dims(p)) {
    size_t pad = 0;
    const BwdParams w = head_dim_pad::padded_shape(p, &pad);
    return pad + backward_workspace_bytes(w);
  }
  if (p.dtype == DType::F32) return f32::bwd_workspace_bytes(p);
#ifdef FLASHATTN_WITH_SM90_BWD
  if (use_sm90_bwd(p)) return sm90::bwd_workspace_bytes(p);
#endif
  const int tile = sm80::tile_head_dim(p.head_dim);
  if (tile == 0) return 0;
  return sm80::bwd_workspace(p, tile).total;
}

bool device_available() noexcept {
  int count = 0;
  const cudaError_t e = cudaGetDeviceCount(&count);
  if (e != cudaSuccess) {
    cudaGetLastError();  // clear the sticky "no driver" error
    return false;
  }
  return count > 0;
}

}  // namespace flashattn::detail::cuda
