// In-process ring: P transports, one per thread, exchanging messages through
// shared mailboxes. A send copies its bytes into the receiver's mailbox at
// once (so the sender may reuse its buffer as soon as wait() returns, as with
// a real transport); a receive waits for the message and copies it out.
#include <chrono>
#include <condition_variable>
#include <cstring>
#include <deque>
#include <map>
#include <mutex>
#include <string>
#include <utility>

#include "flashattn/ring.hpp"

namespace flashattn::ring {
namespace {

struct Mailboxes {
  std::mutex mu;
  std::condition_variable cv;
  std::map<std::pair<int, int>, std::deque<std::vector<uint8_t>>> box;  // (dst, tag) -> FIFO
  int64_t timeout_ms;
};

class LocalPending final : public Pending {
 public:
  LocalPending(std::shared_ptr<Mailboxes> m, int rank, int tag, void* recv, size_t bytes)
      : m_(std::move(m)), rank_(rank), tag_(tag), recv_(recv), bytes_(bytes) {}

  Status wait() noexcept override {
    try {
      std::unique_lock<std::mutex> lock(m_->mu);
      auto& q = m_->box[{rank_, tag_}];
      if (!m_->cv.wait_for(lock, std::chrono::milliseconds(m_->timeout_ms),
                           [&] { return !q.empty(); })) {
        return Status::Error(ErrorCode::Internal,
                             "ring (local): rank " + std::to_string(rank_) + " got no message (tag " +
                                 std::to_string(tag_) + ") from its previous rank within " +
                                 std::to_string(m_->timeout_ms) + " ms");
      }
      std::vector<uint8_t> msg = std::move(q.front());
      q.pop_front();
      lock.unlock();
      if (msg.size() != bytes_) {
        return Status::Error(ErrorCode::Internal,
                             "ring (local): rank " + std::to_string(rank_) + " expected " +
                                 std::to_string(bytes_) + " bytes, received " +
                                 std::to_string(msg.size()));
      }
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
    if (pending == nullptr) return Status::Error(ErrorCode::InvalidArgument, "pending: null");
    if ((send == nullptr && send_bytes) || (recv == nullptr && recv_bytes)) {
      return Status::Error(ErrorCode::InvalidArgument, "send, recv: null buffer with a nonzero size");
    }
    try {
      const auto* p = static_cast<const uint8_t*>(send);
      std::vector<uint8_t> msg(p, p + send_bytes);
      {
        std::lock_guard<std::mutex> lock(m_->mu);
        m_->box[{(rank_ + 1) % world_, tag}].push_back(std::move(msg));
      }
      m_->cv.notify_all();
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

}  // namespace

std::vector<std::unique_ptr<Transport>> make_local_ring(int world, int64_t timeout_ms) {
  std::vector<std::unique_ptr<Transport>> ring;
  if (world < 1) return ring;
  auto m = std::make_shared<Mailboxes>();
  m->timeout_ms = timeout_ms;
  for (int r = 0; r < world; ++r) ring.push_back(std::make_unique<LocalTransport>(m, r, world));
  return ring;
}

}  // namespace flashattn::ring
