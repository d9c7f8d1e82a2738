// CUDA backend entry points (compiled only when FLASHATTN_WITH_CUDA), called by
// src/api/dispatch.cpp after every check in src/api/checks.cpp has passed.
// Pointers in the params are device pointers; p.stream is a cudaStream_t.
#pragma once

#include <cstddef>

#include "common/params.hpp"
#include "common/varlen_tail.hpp"

namespace flashattn::detail::cuda {

// Empty status when the current device and params can run; otherwise an
// Unsupported/InvalidArgument status that says why (arch, head dim, alignment).
Status can_implement(const AttnParams& p) noexcept;

Status forward(const FwdParams& p) noexcept;
Status backward(const BwdParams& p) noexcept;

// Varlen outputs' rows past cu_seqlens[batch] (common/varlen_tail.hpp), on
// p.stream after the call's kernels; reads cu_seqlens on the device.
Status clear_varlen_tail(const varlen_tail::Plan& t, int device_index, void* stream) noexcept;

size_t forward_workspace_bytes(const FwdParams& p) noexcept;
size_t backward_workspace_bytes(const BwdParams& p) noexcept;

// True when at least one CUDA device is visible to this process.
bool device_available() noexcept;

}  // namespace flashattn::detail::cuda
