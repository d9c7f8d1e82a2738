// Device row copies behind common/head_dim_pad.hpp (head_dim_pad.cu).
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>

#include "common/head_dim_pad.hpp"

namespace flashattn::detail::cuda {

// dst: contiguous [n0, n1, heads, width] rows, src's columns then zeros.
cudaError_t launch_pad_rows(const head_dim_pad::Rows& src, void* dst, int64_t width, size_t elem_bytes,
                            cudaStream_t stream);
// The first dst.cols columns of each padded row of src into dst.
cudaError_t launch_crop_rows(const void* src, int64_t width, const head_dim_pad::Rows& dst, size_t elem_bytes,
                             cudaStream_t stream);

}  // namespace flashattn::detail::cuda
