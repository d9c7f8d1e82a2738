// flashattn C++17 API: exact FlashAttention (tiled, online softmax, O(N)
// extra memory) with one interface over CPU and CUDA backends.
//
//   O   = softmax(scale * Q K^T [+ mask, softcap]) V
//   LSE = log(sum_j exp(scale * q_i . k_j))      (fp32, natural log)
//
// Tensors are [batch, seqlen, heads, head_dim] (BSHD) views with arbitrary
// strides in elements (last dim contiguous). GQA: heads_q % heads_kv == 0 and
// query head h reads kv head h / (heads_q / heads_kv). Causal masking is
// bottom-right aligned (query i sees key j iff j <= i + Sk - Sq). A row that
// sees no key gives O = 0 and LSE = -inf.
//
// Functions never throw: failures come back as a Status whose message names
// the argument and what was expected, and no output is written.
#pragma once

#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <string>

#if defined(_WIN32)
#define FLASHATTN_EXPORT __declspec(dllexport)
#else
#define FLASHATTN_EXPORT __attribute__((visibility("default")))
#endif

namespace flashattn {

enum class DType : int32_t { F32 = 0, F16 = 1, BF16 = 2 };
enum class Device : int32_t { CPU = 0, CUDA = 1 };

FLASHATTN_EXPORT const char* dtype_name(DType dtype) noexcept;
FLASHATTN_EXPORT size_t dtype_size(DType dtype) noexcept;

struct TensorView {
  void* data = nullptr;
  DType dtype = DType::F32;
  Device device = Device::CPU;
  int32_t device_index = 0;
  int32_t ndim = 0;
  int64_t shape[4] = {0, 0, 0, 0};
  int64_t stride[4] = {0, 0, 0, 0};  // in elements

  // Row-major view over `shape` (1 to 4 dims).
  FLASHATTN_EXPORT static TensorView contiguous(void* data, DType dtype, std::initializer_list<int64_t> shape,
                               Device device = Device::CPU, int32_t device_index = 0) noexcept;
  FLASHATTN_EXPORT int64_t numel() const noexcept;
};

struct Options {
  float softmax_scale = 0.0f;  // 0 means 1/sqrt(head_dim)
  float softcap = 0.0f;        // 0 disables; else s = cap * tanh(s / cap)
  int64_t window_left = -1;    // keys allowed left of the diagonal; -1 = unbounded
  int64_t window_right = -1;   // keys allowed right of the diagonal; causal forces 0
  bool causal = false;
  bool deterministic = false;  // backward: fixed accumulation order
  void* stream = nullptr;      // cudaStream_t for CUDA tensors
};

struct ForwardArgs {
  TensorView q, k, v;  // [B, Sq, Hq, D], [B, Sk, Hkv, D], [B, Sk, Hkv, D]
  TensorView out;      // [B, Sq, Hq, D], dtype of q
  TensorView lse;      // optional (data == nullptr): fp32 [B, Hq, Sq] contiguous
  Options options;
};

struct BackwardArgs {
  TensorView q, k, v, out, dout;  // forward inputs, its output, dL/dO
  TensorView lse;                 // from the forward
  TensorView dq, dk, dv;          // outputs, shaped like q, k, v
  Options options;
};

enum class ErrorCode : int32_t {
  Ok = 0,
  InvalidArgument = 1,
  Unsupported = 2,
  CudaError = 3,
  Internal = 4,
};

struct Status {
  ErrorCode code = ErrorCode::Ok;
  std::string message;

  bool ok() const noexcept { return code == ErrorCode::Ok; }
  static Status Ok() { return {}; }
  static Status Error(ErrorCode code, std::string message) { return {code, std::move(message)}; }
};

FLASHATTN_EXPORT Status forward(const ForwardArgs& args) noexcept;
FLASHATTN_EXPORT Status backward(const BackwardArgs& args) noexcept;

// Scratch bytes the call allocates besides its inputs and outputs (host memory
// for CPU tensors, device memory for CUDA). Grows as O(N), never O(N^2).
FLASHATTN_EXPORT Status forward_workspace_bytes(const ForwardArgs& args, size_t* bytes) noexcept;
FLASHATTN_EXPORT Status backward_workspace_bytes(const BackwardArgs& args, size_t* bytes) noexcept;

FLASHATTN_EXPORT const char* version() noexcept;
FLASHATTN_EXPORT bool cuda_available() noexcept;

}  // namespace flashattn
