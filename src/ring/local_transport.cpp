// In-process rings: P transports, one per thread, exchanging messages
// through shared mailboxes. A send copies its bytes into the receiver's
// mailbox at once (so the sender may reuse its buffer as soon as wait()
// returns, as with a real transport); a receive waits for the message and
// copies it out. The CUDA variant (CUDA builds) stages through host memory:
// a send waits for the sender's stream and copies device -> host, a receive
// copies host -> device on the receiver's stream and waits for it. Slow and
// synchronous by design: it exists to test the ring on one GPU, not to
// overlap anything.
#include <chrono>
#include <condition_variable>
#include <cstring>
#include <deque>
#include <map>
#include <mutex>
#include <string>
#include <utility>

#if defined(FLASHATTN_WITH_CUDA)
#include <cuda_runtime_api.h>

#include "cuda/cuda_check.hpp"
#endif

#include "flashattn/ring.hpp"

namespace flashattn::ring {
namespace {

struct Mailboxes {
  std::mutex mu;
  std::condition_variable cv;
  std::map<std::pair<int, int>, std::deque<std::vector<uint8_t>>> box;  // (dst, tag) -> FIFO
  int64_t timeout_ms = 0;

  void push(int dst, int tag, std::vector<uint8_t> msg) {
    {
      std::lock_guard<std::mutex> lock(mu);
      box[{dst, tag}].push_back(std::move(msg));
    }
    cv.notify_all();
  }

  // The next message for (rank, tag), which must hold `bytes` bytes.
  Status pop(int rank, int tag, size_t bytes, std::vector<uint8_t>* msg) {
    std::unique_lock<std::mutex> lock(mu);
    auto& q = box[{rank, tag}];
    if (!cv.wait_for(lock, std::chrono::milliseconds(timeout_ms), [&] { return !q.empty(); })) {
      return Status::Error(ErrorCode::Internal,
                           "ring (local): rank " + std::to_string(rank) + " got no message (tag " +
                               std::to_string(tag) + ") from its previous rank within " +
                               std::to_string(timeout_ms) + " ms");
    }
    *msg = std::move(q.front());
    q.pop_front();
    if (msg->size() != bytes) {
      return Status::Error(ErrorCode::Internal, "ring (local): rank " + std::to_string(rank) +
                                                    " expected " + std::to_string(bytes) +
                                                    " bytes, received " + std::to_string(msg->size()));
    }
    return Status::Ok();
  }
};

Status check_buffers(const void* send, size_t send_bytes, void* recv, size_t recv_bytes,
                     std::unique_ptr<Pending>* pending) {
  if (pending == nullptr) return Status::Error(ErrorCode::InvalidArgument, "pending: null");
  if ((send == nullptr && send_bytes) || (recv == nullptr && recv_bytes)) {
    return Status::Error(ErrorCode::InvalidArgument, "send, recv: null buffer with a nonzero size");
  }
  return Status::Ok();
}

class LocalPending final : public Pending {
 public:
  LocalPending(std::shared_ptr<Mailboxes> m, int rank, int tag, void* recv, size_t bytes)
      : m_(std::move(m)), rank_(rank), tag_(tag), recv_(recv), bytes_(bytes) {}

  Status wait() noexcept override {
    try {
      std::vector<uint8_t> msg;
      if (Status s = m_->pop(rank_, tag_, bytes_, &msg); !s.ok()) return s;
      if (bytes_ != 0) std::memcpy(recv_, msg.data(), bytes_);
      return Status::Ok();
    } catch (const std::exception& e) {
      return Status::Error(ErrorCode::Internal, std::string("ring (local): ") + e.what());
    }
  }

 private:
  std::shared_ptr<Mailboxes> m_;
  int rank_, tag_;
  void* recv_;
  size_t bytes_;
};

class LocalTransport final : public Transport {
 public:
  LocalTransport(std::shared_ptr<Mailboxes> m, int rank, int world)
      : m_(std::move(m)), rank_(rank), world_(world) {}
  int rank() const noexcept override { return rank_; }
  int world_size() const noexcept override { return world_; }
  Device device() const noexcept override { return Device::CPU; }

  Status start_exchange(const void* send, size_t send_bytes, void* recv, size_t recv_bytes,
                        int tag, std::unique_ptr<Pending>* pending) noexcept override {
    if (Status s = check_buffers(send, send_bytes, recv, recv_bytes, pending); !s.ok()) return s;
    try {
      const auto* p = static_cast<const uint8_t*>(send);
      m_->push((rank_ + 1) % world_, tag, std::vector<uint8_t>(p, p + send_bytes));
      *pending = std::make_unique<LocalPending>(m_, rank_, tag, recv, recv_bytes);
      return Status::Ok();
    } catch (const std::exception& e) {
      return Status::Error(ErrorCode::Internal, std::string("ring (local): ") + e.what());
    }
  }

 private:
  std::shared_ptr<Mailboxes> m_;
  int rank_, world_;
};

#if defined(FLASHATTN_WITH_CUDA)
using flashattn::detail::cuda::DeviceGuard;

class LocalCudaPending final : public Pending {
 public:
  LocalCudaPending(std::shared_ptr<Mailboxes> m, int rank, int tag, void* recv, size_t bytes,
                   int device, cudaStream_t stream)
      : m_(std::move(m)), rank_(rank), tag_(tag), recv_(recv), bytes_(bytes), device_(device),
        stream_(stream) {}

  Status wait() noexcept override {
    try {
      std::vector<uint8_t> msg;
      if (Status s = m_->pop(rank_, tag_, bytes_, &msg); !s.ok()) return s;
      if (bytes_ == 0) return Status::Ok();
      DeviceGuard g;
      if (Status s = g.enter(device_); !s.ok()) return s;
      FA_CUDA_TRY(cudaMemcpyAsync(recv_, msg.data(), bytes_, cudaMemcpyHostToDevice, stream_));
      FA_CUDA_TRY(cudaStreamSynchronize(stream_));  // msg is freed on return
      return Status::Ok();
    } catch (const std::exception& e) {
      return Status::Error(ErrorCode::Internal, std::string("ring (local cuda): ") + e.what());
    }
  }

 private:
  std::shared_ptr<Mailboxes> m_;
  int rank_, tag_;
  void* recv_;
  size_t bytes_;
  int device_;
  cudaStream_t stream_;
};

class LocalCudaTransport final : public Transport {
 public:
  LocalCudaTransport(std::shared_ptr<Mailboxes> m, int rank, int world, int device,
                     cudaStream_t stream)
      : m_(std::move(m)), rank_(rank), world_(world), device_(device), stream_(stream) {}
  int rank() const noexcept override { return rank_; }
  int world_size() const noexcept override { return world_; }
  Device device() const noexcept override { return Device::CUDA; }

  Status start_exchange(const void* send, size_t send_bytes, void* recv, size_t recv_bytes,
                        int tag, std::unique_ptr<Pending>* pending) noexcept override {
    if (Status s = check_buffers(send, send_bytes, recv, recv_bytes, pending); !s.ok()) return s;
    try {
      std::vector<uint8_t> msg(send_bytes);
      if (send_bytes != 0) {
        DeviceGuard g;
        if (Status s = g.enter(device_); !s.ok()) return s;
        // The send buffer is complete once the work queued before it is.
        FA_CUDA_TRY(cudaStreamSynchronize(stream_));
        FA_CUDA_TRY(cudaMemcpy(msg.data(), send, send_bytes, cudaMemcpyDeviceToHost));
      }
      m_->push((rank_ + 1) % world_, tag, std::move(msg));
      *pending = std::make_unique<LocalCudaPending>(m_, rank_, tag, recv, recv_bytes, device_,
                                                    stream_);
      return Status::Ok();
    } catch (const std::exception& e) {
      return Status::Error(ErrorCode::Internal, std::string("ring (local cuda): ") + e.what());
    }
  }

 private:
  std::shared_ptr<Mailboxes> m_;
  int rank_, world_, device_;
  cudaStream_t stream_;
};
#endif

}  // namespace

std::vector<std::unique_ptr<Transport>> make_local_ring(int world, int64_t timeout_ms) {
  std::vector<std::unique_ptr<Transport>> ring;
  if (world < 1) return ring;
  auto m = std::make_shared<Mailboxes>();
  m->timeout_ms = timeout_ms;
  for (int r = 0; r < world; ++r) ring.push_back(std::make_unique<LocalTransport>(m, r, world));
  return ring;
}

#if defined(FLASHATTN_WITH_CUDA)
std::vector<std::unique_ptr<Transport>> make_local_cuda_ring(int device,
                                                             const std::vector<void*>& streams,
                                                             int64_t timeout_ms) {
  std::vector<std::unique_ptr<Transport>> ring;
  const int world = static_cast<int>(streams.size());
  auto m = std::make_shared<Mailboxes>();
  m->timeout_ms = timeout_ms;
  for (int r = 0; r < world; ++r) {
    ring.push_back(std::make_unique<LocalCudaTransport>(m, r, world, device,
                                                        static_cast<cudaStream_t>(streams[size_t(r)])));
  }
  return ring;
}
#endif

}  // namespace flashattn::ring
