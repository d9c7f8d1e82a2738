// TMA tensor maps of the Hopper kernels' [batch, seqlen, heads, head_dim]
// operands, shared by the forward and backward host adapters. Each function
// returns "" when it succeeds and the reason otherwise, so that the caller
// words the Status (its kernel's name, its error code).
#pragma once

#include <cuda.h>

#include <cstdint>
#include <initializer_list>
#include <string>

#include "common/params.hpp"

namespace flashattn::detail::cuda::sm90 {

struct TmaOperand {
  const char* name;  // the argument's name, for messages
  const void* ptr;
  int64_t seqlen, heads;
  Strides str;  // in elements
};

// Element bytes of the dtypes the Hopper kernels map (fp16/bf16, fp8 e4m3).
// Not the API's dtype_size: these objects also link without the API library
// (bench/gpu/sm80_selfcheck).
inline int64_t tma_elem_bytes(DType dtype) { return dtype == DType::F8E4M3 ? 1 : 2; }

// The head-dim tile a 16-bit head_dim (a multiple of 8 up to 256) runs on,
// forward and backward: the next of 64, 128, 192 and 256. The maps span the caller's head_dim, so the boxes' columns past it
// load as zeros (they add nothing to Q K^T, dS K or dS^T Q, and P V and P^T dO
// leave zeros there) and TMA stores clip them; the kernels' direct stores and
// the backward's pre- and postprocess bound their columns by the caller's
// head_dim.
constexpr int fwd_tile_head_dim(int64_t head_dim) {
  return head_dim <= 64 ? 64 : head_dim <= 128 ? 128 : head_dim <= 192 ? 192 : 256;
}
constexpr int bwd_tile_head_dim(int64_t head_dim) { return fwd_tile_head_dim(head_dim); }

// TMA moves 16-byte units: the base address and every stride that is ever
// applied (a dimension of size > 1) must be multiples of 16 bytes.
std::string tma_alignment_problem(const TmaOperand& t, int64_t batch, int64_t esize);

// 4-d map {head_dim, seqlen, heads, batch} of 16-bit or fp8 elements, box
// {128 bytes of a row, box_rows, 1, 1}, 128-byte swizzle (the layout the wgmma descriptors
// describe); cuTensorMapEncodeTiled is reached through the runtime's driver
// entry point so nothing links libcuda.
std::string encode_tma_4d(CUtensorMap* map, const TmaOperand& t, int64_t batch, int64_t head_dim,
                          DType dtype, int box_rows);

// GQA packing (kernel_args.hpp pack_heads): q as the 5-d map {head_dim,
// group, seqlen, heads / group, batch}, box {128 bytes, group, box_rows /
// group, 1, 1}: box row r is position r / group of the group's head r %
// group (box_rows / group whole groups).
std::string encode_tma_gqa_packed(CUtensorMap* map, const TmaOperand& t, int64_t batch, int64_t head_dim,
                                  DType dtype, int group, int box_rows);

// encode_tma_4d over a kernel's operands; "" or the first failure.
struct TmaMapRequest {
  CUtensorMap* map;
  const TmaOperand& t;
  int box_rows;
};
std::string encode_tma_maps(std::initializer_list<TmaMapRequest> maps, int64_t batch,
                            int64_t head_dim, DType dtype);

}  // namespace flashattn::detail::cuda::sm90
