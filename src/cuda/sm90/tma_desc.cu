// See tma_desc.hpp.
#include "tma_desc.hpp"

#include <cuda_runtime.h>

namespace flashattn::detail::cuda::sm90 {
namespace {

using EncodeTiledFn = CUresult (*)(CUtensorMap*, CUtensorMapDataType, cuuint32_t, void*,
                                   const cuuint64_t*, const cuuint64_t*, const cuuint32_t*,
                                   const cuuint32_t*, CUtensorMapInterleave, CUtensorMapSwizzle,
                                   CUtensorMapL2promotion, CUtensorMapFloatOOBfill);

EncodeTiledFn encode_tiled_fn() {
  static const EncodeTiledFn fn = []() -> EncodeTiledFn {
    void* ptr = nullptr;
    cudaDriverEntryPointQueryResult q = cudaDriverEntryPointSymbolNotFound;
    cudaError_t e = cudaGetDriverEntryPointByVersion("cuTensorMapEncodeTiled", &ptr, 12000,
                                                     cudaEnableDefault, &q);
    if (e != cudaSuccess || q != cudaDriverEntryPointSuccess) {
      (void)cudaGetLastError();
      return nullptr;
    }
    return reinterpret_cast<EncodeTiledFn>(ptr);
  }();
  return fn;
}

// cuTensorMapEncodeTiled is a driver call: it needs a current context, which
// a thread that has made no context-creating runtime call yet lacks (the
// runtime binds the primary context lazily; cudaGetDevice and attribute
// queries do not). Without it the encode fails and the sm90 path would
// silently give way to the sm80 one on a thread's first call (found by
// compute-sanitizer memcheck in the ring's rank threads). When no context is
// current, cudaSetDevice on the current device binds its primary context
// (CUDA >= 12); a context the caller made current is left alone.
using CtxGetCurrentFn = CUresult (*)(CUcontext*);

bool bind_current_context() {
  static const CtxGetCurrentFn get_current = []() -> CtxGetCurrentFn {
    void* ptr = nullptr;
    cudaDriverEntryPointQueryResult q = cudaDriverEntryPointSymbolNotFound;
    cudaError_t e = cudaGetDriverEntryPointByVersion("cuCtxGetCurrent", &ptr, 12000,
                                                     cudaEnableDefault, &q);
    if (e != cudaSuccess || q != cudaDriverEntryPointSuccess) {
      (void)cudaGetLastError();
      return nullptr;
    }
    return reinterpret_cast<CtxGetCurrentFn>(ptr);
  }();
  CUcontext ctx = nullptr;
  if (get_current != nullptr && get_current(&ctx) == CUDA_SUCCESS && ctx != nullptr) return true;
  int dev = 0;
  if (cudaGetDevice(&dev) != cudaSuccess || cudaSetDevice(dev) != cudaSuccess) {
    (void)cudaGetLastError();
    return false;
  }
  return true;
}

}  // namespace

std::string tma_alignment_problem(const TmaOperand& t, int64_t batch, int64_t esize) {
  if (reinterpret_cast<uintptr_t>(t.ptr) % 16 != 0) {
    return std::string(t.name) + ": the sm90 (TMA) kernel needs a 16-byte aligned data pointer";
  }
  const struct {
    const char* dim;
    int64_t size, stride;
  } dims[3] = {{"seqlen", t.seqlen, t.str.seq}, {"heads", t.heads, t.str.head},
               {"batch", batch, t.str.batch}};
  for (const auto& d : dims) {
    if (d.size > 1 && (d.stride * esize) % 16 != 0) {
      return std::string(t.name) + ": the sm90 (TMA) kernel needs the " + d.dim +
             " stride to be a multiple of 16 bytes (" + std::to_string(16 / esize) +
             " elements), got " + std::to_string(d.stride) + " elements";
    }
  }
  return {};
}

namespace {
// A dimension's byte stride for the encode; a stride of a size-1 dimension
// is never applied, so give TMA a valid one there.
cuuint64_t byte_stride(int64_t size, int64_t stride, int64_t esize, int64_t head_dim) {
  return static_cast<cuuint64_t>(size > 1 ? stride * esize : head_dim * esize);
}

// One map of `rank` dimensions: dims[0] is head_dim (contiguous), strides[i]
// the byte stride of dims[i + 1]; 128-byte swizzle.
std::string encode_tiled(CUtensorMap* map, const TmaOperand& t, DType dtype, int rank, const cuuint64_t* dims,
                         const cuuint64_t* strides, const cuuint32_t* box) {
  EncodeTiledFn fn = encode_tiled_fn();
  if (fn == nullptr) return "cuTensorMapEncodeTiled is not available from the driver";
  if (!bind_current_context()) return "no CUDA context could be made current for the TMA encode";
  for (int i = 0; i + 1 < rank; ++i) {
    if (strides[i] >= (cuuint64_t(1) << 40)) {
      return std::string(t.name) + ": a stride reaches 2^40 bytes (TMA limit)";
    }
  }
  const cuuint32_t estr[5] = {1, 1, 1, 1, 1};
  const CUtensorMapDataType dt = dtype == DType::BF16     ? CU_TENSOR_MAP_DATA_TYPE_BFLOAT16
                                 : dtype == DType::F8E4M3 ? CU_TENSOR_MAP_DATA_TYPE_UINT8
                                                          : CU_TENSOR_MAP_DATA_TYPE_FLOAT16;
  CUresult r = fn(map, dt, static_cast<cuuint32_t>(rank), const_cast<void*>(t.ptr), dims, strides, box, estr,
                  CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_SWIZZLE_128B,
                  CU_TENSOR_MAP_L2_PROMOTION_L2_256B, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
  if (r != CUDA_SUCCESS) {
    return std::string(t.name) + ": cuTensorMapEncodeTiled rejected the layout (CUresult " +
           std::to_string(static_cast<int>(r)) + "; e.g. a zero stride on a dimension of size > 1)";
  }
  return {};
}
}  // namespace

std::string encode_tma_4d(CUtensorMap* map, const TmaOperand& t, int64_t batch, int64_t head_dim,
                          DType dtype, int box_rows) {
  const int64_t esize = tma_elem_bytes(dtype);
  auto stride_or = [&](int64_t size, int64_t s) { return byte_stride(size, s, esize, head_dim); };
  const cuuint64_t dims[4] = {static_cast<cuuint64_t>(head_dim), static_cast<cuuint64_t>(t.seqlen),
                              static_cast<cuuint64_t>(t.heads), static_cast<cuuint64_t>(batch)};
  const cuuint64_t strides[3] = {stride_or(t.seqlen, t.str.seq), stride_or(t.heads, t.str.head),
                                 stride_or(batch, t.str.batch)};
  // One 128-byte swizzle atom of the row per box.
  const cuuint32_t box[4] = {static_cast<cuuint32_t>(128 / esize), static_cast<cuuint32_t>(box_rows), 1, 1};
  return encode_tiled(map, t, dtype, 4, dims, strides, box);
}

std::string encode_tma_gqa_packed(CUtensorMap* map, const TmaOperand& t, int64_t batch, int64_t head_dim,
                                  DType dtype, int group, int box_rows) {
  const int64_t esize = tma_elem_bytes(dtype);
  auto stride_or = [&](int64_t size, int64_t s) { return byte_stride(size, s, esize, head_dim); };
  const int64_t kv_heads = t.heads / group;
  const cuuint64_t dims[5] = {static_cast<cuuint64_t>(head_dim), static_cast<cuuint64_t>(group),
                              static_cast<cuuint64_t>(t.seqlen), static_cast<cuuint64_t>(kv_heads),
                              static_cast<cuuint64_t>(batch)};
  const cuuint64_t strides[4] = {stride_or(group, t.str.head), stride_or(t.seqlen, t.str.seq),
                                 stride_or(kv_heads, t.str.head * group), stride_or(batch, t.str.batch)};
  const cuuint32_t box[5] = {static_cast<cuuint32_t>(128 / esize), static_cast<cuuint32_t>(group),
                             static_cast<cuuint32_t>(box_rows / group), 1, 1};
  return encode_tiled(map, t, dtype, 5, dims, strides, box);
}

std::string encode_tma_maps(std::initializer_list<TmaMapRequest> maps, int64_t batch,
                            int64_t head_dim, DType dtype) {
  for (const TmaMapRequest& m : maps) {
    std::string why = encode_tma_4d(m.map, m.t, batch, head_dim, dtype, m.box_rows);
    if (!why.empty()) return why;
  }
  return {};
}

}  // namespace flashattn::detail::cuda::sm90
