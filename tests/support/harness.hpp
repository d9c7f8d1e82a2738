// One attention problem end to end: allocate (any layout, any device), fill
// with fresh random data, poison outputs, call the API, check that exactly the
// outputs were written, and compare with the fp64 reference under the rule.
#pragma once

#include "reference/rule.hpp"

#include <gtest/gtest.h>

#include <ostream>
#include <string>
#include <tuple>
#include <vector>

#include "flashattn/flashattn.hpp"
#include "reference/reference.hpp"
#include "support/tensor.hpp"

namespace fa_test {

struct Case {
  DType dtype = DType::F16;
  int64_t batch = 1, seqlen_q = 1, seqlen_k = 1, heads_q = 1, heads_kv = 1, head_dim = 64;
  int64_t head_dim_v = 0;    // v / out's head dim; 0 = head_dim
  int64_t dim_v() const { return head_dim_v > 0 ? head_dim_v : head_dim; }
  // The head dim the rule's bounds take: the longer of the two dot products.
  int64_t rule_dim() const { return head_dim > dim_v() ? head_dim : dim_v(); }
  bool causal = false;
  int64_t window_left = -1, window_right = -1;
  float softcap = 0.0f;
  float scale = 0.0f;
  Layout layout = Layout::BSHD;
  bool with_lse = true;      // forward: pass an LSE tensor (the backward always needs one)
  bool deterministic = false;

  std::string name() const;  // unique, valid as a gtest name
  flashattn::reference::Problem problem() const;
  flashattn::Options options() const;
};
void PrintTo(const Case& c, std::ostream* os);

const char* dtype_tag(DType dt);

struct Instance {
  Device dev;
  Case c;
  QKV in;
  Tensor out, lse, dout;
  QKV grad;  // dq, dk, dv
  std::vector<double> q, k, v, dO;  // dense values exactly as stored

  flashattn::ForwardArgs fwd_args() const;
  flashattn::BackwardArgs bwd_args() const;
};
// Allocates and fills the inputs (and dout / gradients when `backward`).
Instance make_instance(Device dev, const Case& c, bool backward);

// The reference and the naive, on an instance's inputs.
struct Expected {
  std::vector<double> out, lse;             // fp64 reference
  std::vector<double> naive_out, naive_lse;  // naive_same_dtype
};
Expected expected_forward(const Instance& in);
struct ExpectedGrads {
  std::vector<double> dq, dk, dv, naive_dq, naive_dk, naive_dv;
};
// given_out: the O the backward under test was given (naive_backward).
ExpectedGrads expected_backward(const Instance& in, const std::vector<double>* given_out = nullptr);

// The size M of the terms behind each output (the rule's noise floor).
using flashattn::reference::Magnitudes;
Magnitudes magnitudes(const Instance& in);

// True (and the test is skipped) when a CUDA run reports Unsupported: the
// CUDA backend covers a subset (fp16/bf16, head_dim <= 256, ...).
bool skip_if_unsupported(Device dev, const flashattn::Status& st);

// Full checks (poisoned outputs, exactly-the-outputs written, the rule for
// out / LSE / dq / dk / dv); call as the last statement of a test body, since
// a skip or fatal failure returns from the helper only.
void check_forward(Device dev, const Case& c);
void check_backward(Device dev, const Case& c);

// The devices this test binary runs sweeps on: {CPU}, or {CUDA} in the GPU
// binary (compiled with FA_TEST_ON_CUDA).
std::vector<Device> test_devices();

using DeviceCase = std::tuple<Device, Case>;
std::string device_case_name(const ::testing::TestParamInfo<DeviceCase>& info);

}  // namespace fa_test
