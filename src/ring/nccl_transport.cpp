// Ring transport over NCCL point-to-point (ncclSend / ncclRecv in one group,
// so the send to rank+1 and the receive from rank-1 cannot deadlock). NCCL
// is opened with dlopen: libflashattn keeps loading on machines without it,
// and inside PyTorch it shares the libnccl torch has already loaded.
#include <cuda_runtime_api.h>
#include <dlfcn.h>
#include <nccl.h>

#include <cstdlib>
#include <mutex>
#include <string>

#include "flashattn/ring_nccl.hpp"

namespace flashattn::ring {
namespace {

struct NcclApi {
  decltype(&ncclGroupStart) group_start = nullptr;
  decltype(&ncclGroupEnd) group_end = nullptr;
  decltype(&ncclSend) send = nullptr;
  decltype(&ncclRecv) recv = nullptr;
  decltype(&ncclCommCount) count = nullptr;
  decltype(&ncclCommUserRank) user_rank = nullptr;
  decltype(&ncclGetErrorString) error_string = nullptr;
  std::string error;  // why loading failed, empty when it did not
};

const NcclApi& nccl() {
  static NcclApi api;
  static std::once_flag once;
  std::call_once(once, [] {
    std::string tried;
    void* h = nullptr;
    const char* env = std::getenv("FLASHATTN_NCCL_LIBRARY");
    for (const char* name : {env, "libnccl.so.2", "libnccl.so"}) {
      if (name == nullptr || *name == '\0') continue;
      h = dlopen(name, RTLD_NOW | RTLD_GLOBAL);
      if (h != nullptr) break;
      tried += std::string(tried.empty() ? "" : "; ") + name + ": " + dlerror();
    }
    if (h == nullptr) {
      api.error = "could not open libnccl (" + tried + "); set FLASHATTN_NCCL_LIBRARY";
      return;
    }
    auto sym = [&](const char* name) {
      void* p = dlsym(h, name);
      if (p == nullptr && api.error.empty()) api.error = std::string("libnccl lacks ") + name;
      return p;
    };
    api.group_start = reinterpret_cast<decltype(api.group_start)>(sym("ncclGroupStart"));
    api.group_end = reinterpret_cast<decltype(api.group_end)>(sym("ncclGroupEnd"));
    api.send = reinterpret_cast<decltype(api.send)>(sym("ncclSend"));
    api.recv = reinterpret_cast<decltype(api.recv)>(sym("ncclRecv"));
    api.count = reinterpret_cast<decltype(api.count)>(sym("ncclCommCount"));
    api.user_rank = reinterpret_cast<decltype(api.user_rank)>(sym("ncclCommUserRank"));
    api.error_string = reinterpret_cast<decltype(api.error_string)>(sym("ncclGetErrorString"));
  });
  return api;
}

Status nccl_error(const char* what, ncclResult_t r) {
  return Status::Error(ErrorCode::Internal,
                       std::string("ring (nccl): ") + what + ": " + nccl().error_string(r));
}

Status cuda_error(const char* what, cudaError_t e) {
  return Status::Error(ErrorCode::CudaError,
                       std::string("ring (nccl): ") + what + ": " + cudaGetErrorString(e));
}

class NcclPending final : public Pending {
 public:
  NcclPending(cudaEvent_t done, cudaStream_t compute) : done_(done), compute_(compute) {}
  ~NcclPending() override {
    if (done_ != nullptr) cudaEventDestroy(done_);
  }
  Status wait() noexcept override {
    if (done_ == nullptr) return Status::Ok();
    const cudaError_t e = cudaStreamWaitEvent(compute_, done_, 0);
    cudaEventDestroy(done_);  // released once the wait is enqueued
    done_ = nullptr;
    return e == cudaSuccess ? Status::Ok() : cuda_error("cudaStreamWaitEvent", e);
  }

 private:
  cudaEvent_t done_;
  cudaStream_t compute_;
};

class NcclTransport final : public Transport {
 public:
  NcclTransport(ncclComm_t comm, cudaStream_t compute, cudaStream_t comm_stream, int rank,
                int world)
      : comm_(comm), compute_(compute), stream_(comm_stream), rank_(rank), world_(world) {}
  ~NcclTransport() override { cudaStreamDestroy(stream_); }
  int rank() const noexcept override { return rank_; }
  int world_size() const noexcept override { return world_; }
  Device device() const noexcept override { return Device::CUDA; }

  Status start_exchange(const void* send, size_t send_bytes, void* recv, size_t recv_bytes,
                        int /*tag: NCCL matches in start order*/,
                        std::unique_ptr<Pending>* pending) noexcept override {
    if (pending == nullptr) return Status::Error(ErrorCode::InvalidArgument, "pending: null");
    cudaEvent_t ready = nullptr, done = nullptr;
    cudaError_t e = cudaEventCreateWithFlags(&ready, cudaEventDisableTiming);
    if (e == cudaSuccess) e = cudaEventCreateWithFlags(&done, cudaEventDisableTiming);
    // The transfer starts after everything queued on the compute stream so far.
    if (e == cudaSuccess) e = cudaEventRecord(ready, compute_);
    if (e == cudaSuccess) e = cudaStreamWaitEvent(stream_, ready, 0);
    if (ready != nullptr) cudaEventDestroy(ready);
    if (e != cudaSuccess) {
      if (done != nullptr) cudaEventDestroy(done);
      return cuda_error("ordering the transfer after the compute stream", e);
    }
    const NcclApi& api = nccl();
    const int next = (rank_ + 1) % world_, prev = (rank_ + world_ - 1) % world_;
    ncclResult_t r = api.group_start();
    if (r == ncclSuccess && send_bytes) r = api.send(send, send_bytes, ncclUint8, next, comm_, stream_);
    if (r == ncclSuccess && recv_bytes) r = api.recv(recv, recv_bytes, ncclUint8, prev, comm_, stream_);
    const ncclResult_t end = api.group_end();
    if (r == ncclSuccess) r = end;
    if (r != ncclSuccess) {
      cudaEventDestroy(done);
      return nccl_error("send/recv", r);
    }
    e = cudaEventRecord(done, stream_);
    if (e != cudaSuccess) {
      cudaEventDestroy(done);
      return cuda_error("cudaEventRecord", e);
    }
    try {
      *pending = std::make_unique<NcclPending>(done, compute_);
    } catch (...) {
      cudaEventDestroy(done);
      return Status::Error(ErrorCode::Internal, "ring (nccl): out of host memory");
    }
    return Status::Ok();
  }

 private:
  ncclComm_t comm_;
  cudaStream_t compute_, stream_;
  int rank_, world_;
};

}  // namespace

Status make_nccl_transport(void* comm, void* stream, std::unique_ptr<Transport>* transport) noexcept {
  if (comm == nullptr) return Status::Error(ErrorCode::InvalidArgument, "comm: null ncclComm_t");
  if (transport == nullptr) return Status::Error(ErrorCode::InvalidArgument, "transport: null");
  const NcclApi& api = nccl();
  if (!api.error.empty()) return Status::Error(ErrorCode::Unsupported, "ring (nccl): " + api.error);
  auto* c = static_cast<ncclComm_t>(comm);
  int world = 0, rank = 0;
  if (ncclResult_t r = api.count(c, &world); r != ncclSuccess) return nccl_error("ncclCommCount", r);
  if (ncclResult_t r = api.user_rank(c, &rank); r != ncclSuccess) {
    return nccl_error("ncclCommUserRank", r);
  }
  cudaStream_t own = nullptr;
  if (cudaError_t e = cudaStreamCreateWithFlags(&own, cudaStreamNonBlocking); e != cudaSuccess) {
    return cuda_error("cudaStreamCreate", e);
  }
  try {
    *transport = std::make_unique<NcclTransport>(c, static_cast<cudaStream_t>(stream), own, rank,
                                                 world);
  } catch (...) {
    cudaStreamDestroy(own);
    return Status::Error(ErrorCode::Internal, "ring (nccl): out of host memory");
  }
  return Status::Ok();
}

}  // namespace flashattn::ring
