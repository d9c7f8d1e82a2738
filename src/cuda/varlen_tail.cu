// common/varlen_tail.hpp on the device: zeros (and -inf LSE) into the rows
// of a varlen call's packed outputs past cu_seqlens[batch]. The host does not
// know cu_seqlens[batch] (it stays on the device), so one small grid is
// launched after every varlen call; its threads read the offset and, when
// the packed tensors end with the last sequence (the usual case), write
// nothing. A tail is written a 16-byte chunk per thread when a row's columns
// allow it, else an element per thread. On sm_90+ the grid is launched with
// programmatic dependent launch, so that its launch overlaps the end of the
// call's last grid (bench/NOTES.md, "Rows past the last sequence").
#include <cuda_runtime.h>

#include <cstdint>

#include "common/varlen_tail.hpp"
#include "cuda/cuda_backend.hpp"
#include "cuda/common/device_info.hpp"
#include "cuda/cuda_check.hpp"

namespace flashattn::detail::cuda {
namespace {

using varlen_tail::Plan;
using varlen_tail::Rows;

constexpr int kThreads = 256;
constexpr int kMaxBlocks = 64;  // tails are short; the empty case pays only the launch

// Writes zeros over rows [first, r.total) of r in units of r.unit bytes
// (16 when every row's columns are whole 16-byte chunks, else the element).
__device__ void zero_rows(const Rows& r, int64_t first) {
  if (first >= r.total) return;
  const int unit = r.unit;
  const int64_t per_row = r.cols * r.elem_bytes / unit;  // units in one (row, head)
  const int64_t n = (r.total - first) * r.heads * per_row;
  char* base = static_cast<char*>(r.data);
  for (int64_t e = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; e < n; e += int64_t(gridDim.x) * blockDim.x) {
    const int64_t u = e % per_row, rh = e / per_row;
    const int64_t h = rh % r.heads, row = first + rh / r.heads;
    char* p = base + (row * r.row_stride + h * r.head_stride) * r.elem_bytes + u * unit;
    if (unit == 16) {
      *reinterpret_cast<uint4*>(p) = make_uint4(0, 0, 0, 0);
    } else if (unit == 4) {
      *reinterpret_cast<uint32_t*>(p) = 0;
    } else {
      *reinterpret_cast<uint16_t*>(p) = 0;
    }
  }
}

}  // namespace

// Outside the anonymous namespace: profilers show it by this name.
__global__ void varlen_tail_kernel(Plan t) {
  // cu_seqlens are the call's inputs, which no grid of the call writes: read
  // them before waiting for the previous grid.
  const int64_t first_q = t.cu_q[t.batch], first_k = t.cu_k[t.batch];
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  // Every block waits for the previous grid (it may write these rows: the
  // padded-head-dim crop does) before writing, and before ending: this
  // grid's end then still means the whole call's.
  asm volatile("griddepcontrol.wait;\n" ::: "memory");
#endif
  for (int i = 0; i < t.count; ++i) zero_rows(t.rows[i], t.rows[i].k_side ? first_k : first_q);
  if (t.lse != nullptr && first_q < t.lse_total) {
    const int64_t len = t.lse_total - first_q, n = len * t.lse_heads;
    for (int64_t e = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; e < n; e += int64_t(gridDim.x) * blockDim.x)
      t.lse[(e / len) * t.lse_head_stride + first_q + e % len] = -__int_as_float(0x7f800000);
  }
}

namespace {

// 16 when every (row, head) run of r starts and ends on 16-byte boundaries.
int unit_of(const Rows& r) {
  const int64_t es = r.elem_bytes;
  const bool aligned = reinterpret_cast<uintptr_t>(r.data) % 16 == 0 && (r.cols * es) % 16 == 0 &&
                       (r.row_stride * es) % 16 == 0 && (r.heads == 1 || (r.head_stride * es) % 16 == 0);
  return aligned ? 16 : r.elem_bytes;
}

}  // namespace

Status clear_varlen_tail(const Plan& plan, int device_index, void* stream) noexcept {
  Plan t = plan;
  int64_t most = 0;  // the most units any tail can hold (every row past cu_seqlens[batch] = 0)
  for (int i = 0; i < t.count; ++i) {
    Rows& r = t.rows[i];
    r.unit = unit_of(r);
    const int64_t n = r.total * r.heads * r.cols * r.elem_bytes / r.unit;
    most = n > most ? n : most;
  }
  if (t.lse != nullptr && t.lse_total * t.lse_heads > most) most = t.lse_total * t.lse_heads;
  if (most == 0) return Status::Ok();
  DeviceGuard guard;
  if (Status s = guard.enter(device_index); !s.ok()) return s;
  const int64_t want = (most + kThreads - 1) / kThreads;
  const unsigned blocks = unsigned(want < kMaxBlocks ? want : kMaxBlocks);
  cudaLaunchConfig_t cfg = {};
  cfg.gridDim = dim3(blocks);
  cfg.blockDim = dim3(kThreads);
  cfg.stream = static_cast<cudaStream_t>(stream);
  cudaLaunchAttribute pdl[1];
  pdl[0].id = cudaLaunchAttributeProgrammaticStreamSerialization;
  pdl[0].val.programmaticStreamSerializationAllowed = 1;
  cudaError_t e = cudaSuccess;
  const DeviceInfo* info = device_info(device_index, &e);
  if (info == nullptr) cudaGetLastError();  // unknown arch: a plain launch
  if (info != nullptr && info->major >= 9) {
    cfg.attrs = pdl;
    cfg.numAttrs = 1;
  }
  FA_CUDA_TRY(cudaLaunchKernelEx(&cfg, &varlen_tail_kernel, t));
  FA_CUDA_TRY(cudaGetLastError());
  return Status::Ok();
}

}  // namespace flashattn::detail::cuda
