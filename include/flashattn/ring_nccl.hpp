// NCCL transport for flashattn::ring, in builds that found nccl.h
// (FLASHATTN_WITH_NCCL; libnccl.so.2 is opened at run time, so the library
// has no link-time dependency on it: set FLASHATTN_NCCL_LIBRARY to choose
// the file, e.g. the one of torch's nvidia-nccl wheel).
#pragma once

#include <memory>

#include "flashattn/ring.hpp"

namespace flashattn::ring {

// comm: an initialised ncclComm_t whose ranks, in rank order, form the ring.
// stream: the cudaStream_t the caller computes on. Each exchange runs on a
// stream of the transport's own, after the work queued on `stream` when it
// starts (so a buffer just written there is sent complete); wait() makes
// `stream` wait for the transfer without blocking the host. NCCL has no
// tags: messages between two ranks match in the order they are started,
// which is the same on every rank of the ring.
FLASHATTN_EXPORT Status make_nccl_transport(void* comm, void* stream,
                                            std::unique_ptr<Transport>* transport) noexcept;

}  // namespace flashattn::ring
