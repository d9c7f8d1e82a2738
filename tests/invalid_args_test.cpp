// Every invalid input returns its error, names the argument, and writes
// nothing, through both the C++ API and the C ABI. Each case starts from a
// valid call (checked to succeed) and breaks exactly one thing.
#include <gtest/gtest.h>

#include <cctype>
#include <cmath>
#include <functional>
#include <limits>
#include <string>
#include <thread>
#include <vector>

#include "flashattn/flashattn.h"
#include "flashattn/flashattn.hpp"
#include "support/c_abi.hpp"
#include "support/harness.hpp"

namespace fa_test {
namespace {

using flashattn::BackwardArgs;
using flashattn::ErrorCode;
using flashattn::ForwardArgs;

// True when `name` occurs in `msg` as a whole identifier ("q" matches "q:" or
// "q/k" but not "heads_q").
bool names(const std::string& msg, const std::string& name) {
  auto ident = [](char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '_'; };
  for (size_t p = msg.find(name); p != std::string::npos; p = msg.find(name, p + 1)) {
    const bool left = p == 0 || !ident(msg[p - 1]);
    const bool right = p + name.size() >= msg.size() || !ident(msg[p + name.size()]);
    if (left && right) return true;
  }
  return false;
}

// The valid starting point: GQA, Sq != Sk, fp16, CPU.
Case base_case() {
  Case c;
  c.dtype = DType::F16;
  c.batch = 2;
  c.seqlen_q = 17;
  c.seqlen_k = 33;
  c.heads_q = 4;
  c.heads_kv = 2;
  c.head_dim = 64;
  c.causal = true;
  return c;
}

struct Bad {
  std::string label;
  std::function<void(ForwardArgs&)> fwd;   // null: not a forward case
  std::function<void(BackwardArgs&)> bwd;  // null: not a backward case
  ErrorCode code;
  std::string arg;  // must be named in the message
};

constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();
constexpr float kInf = std::numeric_limits<float>::infinity();

std::vector<Bad> bad_cases() {
  std::vector<Bad> v;
  auto both = [&](std::string label, auto f, ErrorCode code, std::string arg) {
    v.push_back({label, [f](ForwardArgs& a) { f(a.q, a.k, a.v, a.options); },
                 [f](BackwardArgs& a) { f(a.q, a.k, a.v, a.options); }, code, arg});
  };
  auto fwd = [&](std::string label, std::function<void(ForwardArgs&)> f, ErrorCode code,
                 std::string arg) { v.push_back({label, f, nullptr, code, arg}); };
  auto bwd = [&](std::string label, std::function<void(BackwardArgs&)> f, ErrorCode code,
                 std::string arg) { v.push_back({label, nullptr, f, code, arg}); };
  using TV = flashattn::TensorView;
  using O = flashattn::Options;
  const ErrorCode IA = ErrorCode::InvalidArgument;

  // Null pointers.
  both("q_null", [](TV& q, TV&, TV&, O&) { q.data = nullptr; }, IA, "q");
  both("k_null", [](TV&, TV& k, TV&, O&) { k.data = nullptr; }, IA, "k");
  both("v_null", [](TV&, TV&, TV& v, O&) { v.data = nullptr; }, IA, "v");
  fwd("out_null", [](ForwardArgs& a) { a.out.data = nullptr; }, IA, "out");
  bwd("out_null", [](BackwardArgs& a) { a.out.data = nullptr; }, IA, "out");
  bwd("dout_null", [](BackwardArgs& a) { a.dout.data = nullptr; }, IA, "dout");
  bwd("lse_null", [](BackwardArgs& a) { a.lse.data = nullptr; }, IA, "lse");
  bwd("dq_null", [](BackwardArgs& a) { a.dq.data = nullptr; }, IA, "dq");
  bwd("dk_null", [](BackwardArgs& a) { a.dk.data = nullptr; }, IA, "dk");
  bwd("dv_null", [](BackwardArgs& a) { a.dv.data = nullptr; }, IA, "dv");
  // Wrong ndim.
  both("q_ndim3", [](TV& q, TV&, TV&, O&) { q.ndim = 3; }, IA, "q");
  both("v_ndim2", [](TV&, TV&, TV& v, O&) { v.ndim = 2; }, IA, "v");
  fwd("out_ndim3", [](ForwardArgs& a) { a.out.ndim = 3; }, IA, "out");
  fwd("lse_ndim4", [](ForwardArgs& a) { a.lse.ndim = 4; a.lse.shape[3] = 1; a.lse.stride[3] = 1; }, IA, "lse");
  bwd("dq_ndim3", [](BackwardArgs& a) { a.dq.ndim = 3; }, IA, "dq");
  bwd("lse_ndim2", [](BackwardArgs& a) { a.lse.ndim = 2; }, IA, "lse");
  // Mismatched batch / heads / head_dim / seqlen.
  both("k_batch", [](TV&, TV& k, TV&, O&) { k.shape[0] = 1; }, IA, "k");
  both("v_batch", [](TV&, TV&, TV& v, O&) { v.shape[0] = 1; }, IA, "v");
  both("v_seqlen", [](TV&, TV&, TV& v, O&) { v.shape[1] -= 1; }, IA, "v");
  both("v_heads", [](TV&, TV&, TV& v, O&) { v.shape[2] = 1; }, IA, "v");
  both("k_head_dim", [](TV&, TV& k, TV&, O&) { k.shape[3] = 32; }, IA, "k");
  both("v_head_dim_264", [](TV&, TV&, TV& v, O&) { v.shape[3] = 264; }, IA, "v");
  // v may have a head dim of its own, and then out / dout / dv follow v.
  fwd("out_follows_v_head_dim", [](ForwardArgs& a) { a.v.shape[3] = 32; }, IA, "out");
  bwd("dv_follows_v_head_dim", [](BackwardArgs& a) {
    for (auto* t : {&a.v, &a.out, &a.dout}) t->shape[3] = 32;
  }, IA, "dv");
  bwd("dq_follows_q_head_dim", [](BackwardArgs& a) {
    for (auto* t : {&a.v, &a.out, &a.dout, &a.dv, &a.dq}) t->shape[3] = 32;
  }, IA, "dq");
  fwd("out_seqlen", [](ForwardArgs& a) { a.out.shape[1] -= 1; }, IA, "out");
  fwd("out_heads", [](ForwardArgs& a) { a.out.shape[2] = 2; }, IA, "out");
  fwd("out_head_dim", [](ForwardArgs& a) { a.out.shape[3] = 32; }, IA, "out");
  bwd("dout_batch", [](BackwardArgs& a) { a.dout.shape[0] = 1; }, IA, "dout");
  bwd("dq_heads", [](BackwardArgs& a) { a.dq.shape[2] = 2; }, IA, "dq");
  bwd("dk_seqlen", [](BackwardArgs& a) { a.dk.shape[1] -= 1; }, IA, "dk");
  bwd("dv_heads", [](BackwardArgs& a) { a.dv.shape[2] = 1; }, IA, "dv");
  bwd("out_head_dim", [](BackwardArgs& a) { a.out.shape[3] = 32; }, IA, "out");
  // heads_q % heads_kv != 0 (k and v both claim 3 heads, strides still valid
  // memory for the first 2).
  both("gqa_not_divisible", [](TV&, TV& k, TV& v, O&) { k.shape[2] = v.shape[2] = 3; }, IA,
       "heads_kv");
  // dtype mismatches and unknown dtypes.
  both("k_dtype", [](TV&, TV& k, TV&, O&) { k.dtype = DType::BF16; }, IA, "k");
  both("v_dtype", [](TV&, TV&, TV& v, O&) { v.dtype = DType::F32; }, IA, "v");
  both("q_dtype_unknown", [](TV& q, TV&, TV&, O&) { q.dtype = static_cast<DType>(7); }, IA, "q");
  fwd("out_dtype", [](ForwardArgs& a) { a.out.dtype = DType::BF16; }, IA, "out");
  bwd("dq_dtype", [](BackwardArgs& a) { a.dq.dtype = DType::F32; }, IA, "dq");
  bwd("dout_dtype", [](BackwardArgs& a) { a.dout.dtype = DType::BF16; }, IA, "dout");
  // Last-dim stride != 1, negative strides / sizes.
  both("q_last_stride", [](TV& q, TV&, TV&, O&) { q.stride[3] = 2; }, IA, "q");
  both("k_last_stride", [](TV&, TV& k, TV&, O&) { k.stride[3] = 0; }, IA, "k");
  fwd("out_last_stride", [](ForwardArgs& a) { a.out.stride[3] = 2; }, IA, "out");
  bwd("dv_last_stride", [](BackwardArgs& a) { a.dv.stride[3] = 2; }, IA, "dv");
  both("q_negative_size", [](TV& q, TV&, TV&, O&) { q.shape[1] = -1; }, IA, "q");
  // Outputs that overlap themselves or an input.
  fwd("out_stride_overlap", [](ForwardArgs& a) { a.out.stride[1] = 0; }, IA, "out");
  fwd("out_aliases_q", [](ForwardArgs& a) { a.out.data = a.q.data; }, IA, "out");
  bwd("dq_aliases_dout", [](BackwardArgs& a) { a.dq.data = a.dout.data; }, IA, "dq");
  bwd("dk_aliases_dv", [](BackwardArgs& a) { a.dk.data = a.dv.data; }, IA, "dk");
  // LSE dtype / shape / layout.
  fwd("lse_dtype", [](ForwardArgs& a) { a.lse.dtype = DType::F16; }, IA, "lse");
  fwd("lse_shape", [](ForwardArgs& a) { a.lse.shape[2] += 1; }, IA, "lse");
  fwd("lse_heads", [](ForwardArgs& a) { a.lse.shape[1] = 2; }, IA, "lse");
  fwd("lse_not_contiguous", [](ForwardArgs& a) { a.lse.stride[1] += 1; }, IA, "lse");
  bwd("lse_dtype", [](BackwardArgs& a) { a.lse.dtype = DType::BF16; }, IA, "lse");
  bwd("lse_shape", [](BackwardArgs& a) { a.lse.shape[0] = 1; }, IA, "lse");
  // head_dim 0 (every tensor says 0, strides unchanged). (Any head dim in
  // [1, 256] runs: the odd ones on padded copies; the forward and backward
  // sweeps' OddHeadDim cases.)
  v.push_back({"head_dim_0",
               [](ForwardArgs& a) {
                 for (auto* t : {&a.q, &a.k, &a.v, &a.out}) t->shape[3] = 0;
               },
               [](BackwardArgs& a) {
                 for (auto* t : {&a.q, &a.k, &a.v, &a.out, &a.dout, &a.dq, &a.dk, &a.dv})
                   t->shape[3] = 0;
               },
               IA, "head_dim"});
  // Options.
  both("window_left_m2", [](TV&, TV&, TV&, O& o) { o.window_left = -2; }, IA, "window_left");
  both("window_right_m5", [](TV&, TV&, TV&, O& o) { o.window_right = -5; }, IA, "window_right");
  both("softcap_negative", [](TV&, TV&, TV&, O& o) { o.softcap = -1.0f; }, IA, "softcap");
  both("softcap_nan", [](TV&, TV&, TV&, O& o) { o.softcap = kNaN; }, IA, "softcap");
  both("softcap_inf", [](TV&, TV&, TV&, O& o) { o.softcap = kInf; }, IA, "softcap");
  both("scale_negative", [](TV&, TV&, TV&, O& o) { o.softmax_scale = -0.5f; }, IA, "softmax_scale");
  both("scale_nan", [](TV&, TV&, TV&, O& o) { o.softmax_scale = kNaN; }, IA, "softmax_scale");
  both("scale_inf", [](TV&, TV&, TV&, O& o) { o.softmax_scale = kInf; }, IA, "softmax_scale");
  // Devices: mixed devices are invalid in any build.
  both("k_on_other_device", [](TV&, TV& k, TV&, O&) { k.device = flashattn::Device::CUDA; }, IA, "k");
  fwd("out_on_other_device", [](ForwardArgs& a) { a.out.device = flashattn::Device::CUDA; }, IA, "out");
  bwd("dk_on_other_device", [](BackwardArgs& a) { a.dk.device = flashattn::Device::CUDA; }, IA, "dk");
  both("q_device_unknown", [](TV& q, TV&, TV&, O&) { q.device = static_cast<flashattn::Device>(9); }, IA, "q");
  return v;
}

class InvalidForward : public ::testing::TestWithParam<Bad> {};
class InvalidBackward : public ::testing::TestWithParam<Bad> {};

std::vector<Bad> forward_bad() {
  std::vector<Bad> v;
  for (Bad& b : bad_cases())
    if (b.fwd) v.push_back(b);
  return v;
}
std::vector<Bad> backward_bad() {
  std::vector<Bad> v;
  for (Bad& b : bad_cases())
    if (b.bwd) v.push_back(b);
  return v;
}

void PrintTo(const Bad& b, std::ostream* os) { *os << b.label; }

// A valid call succeeds first, so the failures below are caused by the one change.
TEST(InvalidArgsBaseline, ValidCallsSucceed) {
  Instance in = make_instance(Device::CPU, base_case(), true);
  flashattn::Status st = flashattn::forward(in.fwd_args());
  ASSERT_TRUE(st.ok()) << st.message;
  st = flashattn::backward(in.bwd_args());
  ASSERT_TRUE(st.ok()) << st.message;
  fa_forward_args fa = to_c(in.fwd_args());
  EXPECT_EQ(fa_forward(&fa), FA_OK) << fa_last_error();
  fa_backward_args ba = to_c(in.bwd_args());
  EXPECT_EQ(fa_backward(&ba), FA_OK) << fa_last_error();
}

TEST_P(InvalidForward, RejectsAndWritesNothing) {
  const Bad& b = GetParam();
  Instance in = make_instance(Device::CPU, base_case(), false);
  ForwardArgs a = in.fwd_args();
  b.fwd(a);
  {
    CallGuard guard({&in.in.q, &in.in.k, &in.in.v}, {&in.out, &in.lse});
    const flashattn::Status st = flashattn::forward(a);
    EXPECT_EQ(st.code, b.code) << st.message;
    EXPECT_TRUE(names(st.message, b.arg)) << "message does not name '" << b.arg << "': " << st.message;
    EXPECT_TRUE(guard.untouched());
    size_t ws = 12345;
    const flashattn::Status ws_st = flashattn::forward_workspace_bytes(a, &ws);
    EXPECT_EQ(ws_st.code, b.code) << ws_st.message;
    EXPECT_EQ(ws, 12345u) << "workspace_bytes wrote its result on failure";
  }
  {
    CallGuard guard({&in.in.q, &in.in.k, &in.in.v}, {&in.out, &in.lse});
    fa_forward_args ca = to_c(a);
    const fa_status st = fa_forward(&ca);
    EXPECT_EQ(static_cast<int>(st), static_cast<int>(b.code));
    const std::string err = fa_last_error();
    EXPECT_FALSE(err.empty());
    EXPECT_TRUE(names(err, b.arg)) << "fa_last_error does not name '" << b.arg << "': " << err;
    EXPECT_TRUE(guard.untouched());
  }
}

TEST_P(InvalidBackward, RejectsAndWritesNothing) {
  const Bad& b = GetParam();
  Instance in = make_instance(Device::CPU, base_case(), true);
  ASSERT_TRUE(flashattn::forward(in.fwd_args()).ok());
  BackwardArgs a = in.bwd_args();
  b.bwd(a);
  const std::vector<const Tensor*> inputs{&in.in.q, &in.in.k, &in.in.v, &in.out, &in.dout, &in.lse};
  const std::vector<const Tensor*> outputs{&in.grad.q, &in.grad.k, &in.grad.v};
  {
    CallGuard guard(inputs, outputs);
    const flashattn::Status st = flashattn::backward(a);
    EXPECT_EQ(st.code, b.code) << st.message;
    EXPECT_TRUE(names(st.message, b.arg)) << "message does not name '" << b.arg << "': " << st.message;
    EXPECT_TRUE(guard.untouched());
    size_t ws = 12345;
    const flashattn::Status ws_st = flashattn::backward_workspace_bytes(a, &ws);
    EXPECT_EQ(ws_st.code, b.code) << ws_st.message;
    EXPECT_EQ(ws, 12345u) << "workspace_bytes wrote its result on failure";
  }
  {
    CallGuard guard(inputs, outputs);
    fa_backward_args ca = to_c(a);
    const fa_status st = fa_backward(&ca);
    EXPECT_EQ(static_cast<int>(st), static_cast<int>(b.code));
    const std::string err = fa_last_error();
    EXPECT_FALSE(err.empty());
    EXPECT_TRUE(names(err, b.arg)) << "fa_last_error does not name '" << b.arg << "': " << err;
    EXPECT_TRUE(guard.untouched());
  }
}

std::string bad_name(const ::testing::TestParamInfo<Bad>& i) { return i.param.label; }
INSTANTIATE_TEST_SUITE_P(Api, InvalidForward, ::testing::ValuesIn(forward_bad()), bad_name);
INSTANTIATE_TEST_SUITE_P(Api, InvalidBackward, ::testing::ValuesIn(backward_bad()), bad_name);

// head_dim 264: a multiple of 8 but above the 256 limit, on real memory.
TEST(InvalidArgsHeadDim, Above256IsRejected) {
  Case c = base_case();
  c.head_dim = 264;
  Instance in = make_instance(Device::CPU, c, true);
  CallGuard guard({&in.in.q, &in.in.k, &in.in.v}, {&in.out, &in.lse});
  const flashattn::Status st = flashattn::forward(in.fwd_args());
  EXPECT_NE(st.code, ErrorCode::Ok);
  EXPECT_TRUE(st.code == ErrorCode::InvalidArgument || st.code == ErrorCode::Unsupported) << st.message;
  EXPECT_TRUE(names(st.message, "head_dim")) << st.message;
  EXPECT_TRUE(guard.untouched());
  CallGuard guard2({&in.in.q, &in.in.k, &in.in.v, &in.out, &in.lse, &in.dout},
                   {&in.grad.q, &in.grad.k, &in.grad.v});
  const flashattn::Status bst = flashattn::backward(in.bwd_args());
  EXPECT_NE(bst.code, ErrorCode::Ok);
  EXPECT_TRUE(names(bst.message, "head_dim")) << bst.message;
  EXPECT_TRUE(guard2.untouched());
}

// All tensors on CUDA: a CPU-only build must answer Unsupported (the data is
// host memory here, so a build with CUDA could only fail later; skipped there).
TEST(InvalidArgsDevice, CudaTensorsInCpuOnlyBuild) {
#if FA_LIB_WITH_CUDA
  GTEST_SKIP() << "this build has a CUDA backend";
#else
  Instance in = make_instance(Device::CPU, base_case(), true);
  ForwardArgs a = in.fwd_args();
  for (auto* t : {&a.q, &a.k, &a.v, &a.out, &a.lse}) t->device = flashattn::Device::CUDA;
  CallGuard guard({&in.in.q, &in.in.k, &in.in.v}, {&in.out, &in.lse});
  const flashattn::Status st = flashattn::forward(a);
  EXPECT_EQ(st.code, ErrorCode::Unsupported) << st.message;
  EXPECT_FALSE(st.message.empty());
  fa_forward_args ca = to_c(a);
  EXPECT_EQ(fa_forward(&ca), FA_ERR_UNSUPPORTED);
  EXPECT_FALSE(std::string(fa_last_error()).empty());
  BackwardArgs b = in.bwd_args();
  for (auto* t : {&b.q, &b.k, &b.v, &b.out, &b.dout, &b.lse, &b.dq, &b.dk, &b.dv})
    t->device = flashattn::Device::CUDA;
  EXPECT_EQ(flashattn::backward(b).code, ErrorCode::Unsupported);
  EXPECT_TRUE(guard.untouched());
  EXPECT_FALSE(flashattn::cuda_available());
  EXPECT_EQ(fa_cuda_available(), 0);
#endif
}

TEST(InvalidArgsCAbi, NullArgsAndBadNdim) {
  EXPECT_EQ(fa_forward(nullptr), FA_ERR_INVALID_ARGUMENT);
  EXPECT_FALSE(std::string(fa_last_error()).empty());
  EXPECT_EQ(fa_backward(nullptr), FA_ERR_INVALID_ARGUMENT);
  EXPECT_FALSE(std::string(fa_last_error()).empty());
  size_t ws = 0;
  EXPECT_EQ(fa_forward_workspace_bytes(nullptr, &ws), FA_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(fa_backward_workspace_bytes(nullptr, &ws), FA_ERR_INVALID_ARGUMENT);

  Instance in = make_instance(Device::CPU, base_case(), false);
  fa_forward_args a = to_c(in.fwd_args());
  EXPECT_EQ(fa_forward_workspace_bytes(&a, nullptr), FA_ERR_INVALID_ARGUMENT);
  for (int32_t bad : {5, -1, 100}) {
    fa_forward_args b = a;
    b.k.ndim = bad;  // must be refused before shape[] is read past its end
    CallGuard guard({&in.in.q, &in.in.k, &in.in.v}, {&in.out, &in.lse});
    EXPECT_EQ(fa_forward(&b), FA_ERR_INVALID_ARGUMENT) << bad;
    EXPECT_TRUE(names(fa_last_error(), "k")) << fa_last_error();
    EXPECT_TRUE(guard.untouched());
  }
  const int64_t shape5[5] = {1, 1, 1, 1, 1};
  fa_tensor t = fa_tensor_contiguous(nullptr, FA_F32, FA_CPU, 0, 5, shape5);
  fa_forward_args b = a;
  b.q = t;
  EXPECT_EQ(fa_forward(&b), FA_ERR_INVALID_ARGUMENT);
}

// Every C entry point checks each of its tensors' ndim before it reads
// shape[], and names the bad one: the backward's, the varlen lengths', the
// KV cache's and the fp8 descale factors' (zeroed structs: ndim 0 passes).
TEST(InvalidArgsCAbi, BadNdimNamedByEveryEntryPoint) {
  auto expect_refused = [](fa_status st, const char* name) {
    EXPECT_EQ(st, FA_ERR_INVALID_ARGUMENT) << name;
    EXPECT_TRUE(names(fa_last_error(), name)) << fa_last_error();
  };
  size_t ws = 0;
  {
    fa_backward_args b{};
    b.dv.ndim = 5;
    expect_refused(fa_backward(&b), "dv");
    expect_refused(fa_backward_workspace_bytes(&b, &ws), "dv");
    b.dv.ndim = 0;
    b.dout.ndim = -2;
    expect_refused(fa_backward(&b), "dout");
  }
  {
    fa_forward_args f{};
    fa_backward_args b{};
    fa_varlen vl{};
    vl.cu_seqlens_k.ndim = 9;
    expect_refused(fa_forward_varlen(&f, &vl), "cu_seqlens_k");
    expect_refused(fa_backward_varlen(&b, &vl), "cu_seqlens_k");
    vl.cu_seqlens_k.ndim = 0;
    vl.cu_seqlens_q.ndim = -1;
    expect_refused(fa_forward_varlen(&f, &vl), "cu_seqlens_q");
  }
  {
    fa_kvcache_args k{};
    k.rotary_sin.ndim = 6;
    expect_refused(fa_forward_kvcache(&k), "rotary_sin");
    expect_refused(fa_forward_kvcache_workspace_bytes(&k, &ws), "rotary_sin");
    k.rotary_sin.ndim = 0;
    k.block_table.ndim = 5;
    expect_refused(fa_forward_kvcache(&k), "block_table");
  }
  {
    fa_forward_args f{};
    fa_fp8_descale sc{};
    sc.v.ndim = 7;
    expect_refused(fa_forward_fp8(&f, &sc), "fp8_descale.v");
    f.dropout_mask.ndim = 5;  // the forward's own tensors come first
    expect_refused(fa_forward_fp8(&f, &sc), "dropout_mask");
  }
}

// fa_last_error is per thread: a failure on another thread does not show here.
TEST(InvalidArgsCAbi, LastErrorIsThreadLocal) {
  EXPECT_EQ(fa_forward(nullptr), FA_ERR_INVALID_ARGUMENT);
  const std::string mine = fa_last_error();
  ASSERT_FALSE(mine.empty());
  std::string theirs;
  std::thread th([&] {
    theirs = fa_last_error();  // nothing failed on this thread yet
    fa_options o;
    fa_options_init(&o);
    fa_backward(nullptr);
  });
  th.join();
  EXPECT_EQ(theirs, "");
  EXPECT_EQ(std::string(fa_last_error()), mine);
}

}  // namespace
}  // namespace fa_test
