// Self-check and timing of the CUDA backend's sm80 kernels, standalone: calls
// flashattn::detail::cuda::{forward,backward} with device tensors and compares
// against attention computed here on the CPU (double precision, plus a naive
// version in the input dtype that rounds P and dS as kernels do). Criterion
// (DESIGN.md): max|gpu - ref| <= 2 * max|naive_dtype - ref| + atol.
//
//   sm80_selfcheck            checks, then timings
//   sm80_selfcheck --check [substring]   checks only (those whose name contains it)
//   sm80_selfcheck --bench    timings only
// Exit status 0 only when every check passes.
#include <cuda_runtime.h>

#include "attn_cpu_ref.hpp"
#include "cuda/cuda_backend.hpp"

#define CK(x)                                                                                  \
  do {                                                                                         \
    cudaError_t e_ = (x);                                                                      \
    if (e_ != cudaSuccess) {                                                                   \
      std::fprintf(stderr, "%s:%d %s: %s\n", __FILE__, __LINE__, #x, cudaGetErrorString(e_)); \
      std::exit(2);                                                                            \
    }                                                                                          \
  } while (0)

struct DevT {
  void* ptr = nullptr;
  size_t bytes = 0;
};
static DevT upload(const HostT& t, fa::DType dt) {
  const std::vector<uint16_t> buf = to_phys(t, dt);
  DevT r;
  r.bytes = buf.size() * 2;
  CK(cudaMalloc(&r.ptr, r.bytes));
  CK(cudaMemcpy(r.ptr, buf.data(), r.bytes, cudaMemcpyHostToDevice));
  return r;
}
static DevT alloc_poisoned(size_t bytes) {
  DevT r;
  r.bytes = bytes;
  CK(cudaMalloc(&r.ptr, bytes));
  CK(cudaMemset(r.ptr, 0xFF, bytes));  // NaN in fp16, bf16 and fp32
  return r;
}
static HostT download(const DevT& d, const HostT& like, fa::DType dt) {
  std::vector<uint16_t> buf(like.numel());
  CK(cudaMemcpy(buf.data(), d.ptr, buf.size() * 2, cudaMemcpyDeviceToHost));
  return from_phys(buf, like, dt);
}

static bool run_case(const Case& c, std::mt19937& rng) {
  print_case(c);
  const HostT q = make_random(c.B, c.Sq, c.Hq, c.D, c.bhsd, c.dt, rng);
  const HostT k = make_random(c.B, c.Sk, c.Hkv, c.D, c.bhsd, c.dt, rng);
  const HostT v = make_random(c.B, c.Sk, c.Hkv, c.D, c.bhsd, c.dt, rng);
  const HostT dout = make_random(c.B, c.Sq, c.Hq, c.D, c.bhsd, c.dt, rng);
  const Grads ref = cpu_attention(c, q, k, v, dout, false);
  const Grads nai = cpu_attention(c, q, k, v, dout, true);

  DevT dq_ = upload(q, c.dt), dk_ = upload(k, c.dt), dv_ = upload(v, c.dt), ddo = upload(dout, c.dt);
  DevT dO = alloc_poisoned(q.numel() * 2);
  DevT dL = alloc_poisoned(size_t(c.B) * c.Hq * c.Sq * 4);

  fd::FwdParams fp;
  static_cast<fd::AttnParams&>(fp) = base_params(c);
  fp.q = dq_.ptr;
  fp.k = dk_.ptr;
  fp.v = dv_.ptr;
  fp.q_str = q.str();
  fp.k_str = k.str();
  fp.v_str = v.str();
  fp.out = dO.ptr;
  fp.o_str = q.str();
  fp.lse = static_cast<float*>(dL.ptr);
  fa::Status st = fd::cuda::can_implement(fp);
  if (st.ok()) st = fd::cuda::forward(fp);
  if (!st.ok()) {
    std::printf("    forward: %s FAIL\n", st.message.c_str());
    return false;
  }
  CK(cudaDeviceSynchronize());
  const HostT o = download(dO, q, c.dt);
  std::vector<float> lse(size_t(c.B) * c.Hq * c.Sq);
  CK(cudaMemcpy(lse.data(), dL.ptr, lse.size() * 4, cudaMemcpyDeviceToHost));
  bool ok = report("O", compare(o, ref.o, nai.o));
  const bool lok = report_lse(lse, ref.lse);
  ok = ok && lok;

  // Backward from the kernel's own O and LSE.
  DevT gq = alloc_poisoned(q.numel() * 2), gk = alloc_poisoned(k.numel() * 2), gv = alloc_poisoned(v.numel() * 2);
  fd::BwdParams bp;
  static_cast<fd::AttnParams&>(bp) = base_params(c);
  bp.q = dq_.ptr;
  bp.k = dk_.ptr;
  bp.v = dv_.ptr;
  bp.q_str = q.str();
  bp.k_str = k.str();
  bp.v_str = v.str();
  bp.out = dO.ptr;
  bp.o_str = q.str();
  bp.dout = ddo.ptr;
  bp.do_str = dout.str();
  bp.lse = static_cast<const float*>(dL.ptr);
  bp.dq = gq.ptr;
  bp.dk = gk.ptr;
  bp.dv = gv.ptr;
  bp.dq_str = q.str();
  bp.dk_str = k.str();
  bp.dv_str = v.str();
  bp.deterministic = c.det;
  st = fd::cuda::backward(bp);
  if (!st.ok()) {
    std::printf("    backward: %s FAIL\n", st.message.c_str());
    return false;
  }
  CK(cudaDeviceSynchronize());
  const HostT hq = download(gq, q, c.dt), hk = download(gk, k, c.dt), hv = download(gv, v, c.dt);
  ok = report("dQ", compare(hq, ref.dq, nai.dq)) && ok;
  ok = report("dK", compare(hk, ref.dk, nai.dk)) && ok;
  ok = report("dV", compare(hv, ref.dv, nai.dv)) && ok;

  if (c.det) {  // a second run must be bit-identical
    for (DevT* t : {&gq, &gk, &gv}) CK(cudaMemset(t->ptr, 0xFF, t->bytes));
    st = fd::cuda::backward(bp);
    CK(cudaDeviceSynchronize());
    bool same = st.ok();
    for (auto pr : {std::make_pair(&gq, &hq), std::make_pair(&gk, &hk), std::make_pair(&gv, &hv)}) {
      const HostT again = download(*pr.first, *pr.second, c.dt);
      same = same && std::memcmp(again.val.data(), pr.second->val.data(), again.val.size() * 4) == 0;
    }
    std::printf("    deterministic rerun bit-identical: %s\n", same ? "ok" : "FAIL");
    ok = ok && same;
  }
  for (DevT* t : {&dq_, &dk_, &dv_, &ddo, &dO, &dL, &gq, &gk, &gv}) CK(cudaFree(t->ptr));
  std::printf("    %s\n", ok ? "PASS" : "FAIL");
  return ok;
}

static bool check_errors() {
  // Rejections that need no kernel: dtype, head dim, alignment.
  bool ok = true;
  Case c{"err", fa::DType::BF16, 1, 16, 16, 1, 1, 128, false, -1, -1, 0.f, false, false};
  fd::AttnParams p = base_params(c);
  void* buf = nullptr;
  CK(cudaMalloc(&buf, 1 << 20));
  p.q = p.k = p.v = buf;
  p.q_str = p.k_str = p.v_str = {16 * 128, 128, 128};
  p.dtype = fa::DType::F32;
  fa::Status s = fd::cuda::can_implement(p);
  std::printf("[errors] fp32: %s\n", s.message.c_str());
  ok = ok && s.code == fa::ErrorCode::Unsupported;
  p.dtype = fa::DType::BF16;
  p.head_dim = 264;
  s = fd::cuda::can_implement(p);
  std::printf("[errors] hdim 264: %s\n", s.message.c_str());
  ok = ok && s.code == fa::ErrorCode::Unsupported;
  p.head_dim = 128;
  p.k = static_cast<char*>(buf) + 8;
  s = fd::cuda::can_implement(p);
  std::printf("[errors] misaligned k: %s\n", s.message.c_str());
  ok = ok && s.code == fa::ErrorCode::InvalidArgument;
  p.k = buf;
  p.v_str.seq = 132;
  s = fd::cuda::can_implement(p);
  std::printf("[errors] v seq stride 132: %s\n", s.message.c_str());
  ok = ok && s.code == fa::ErrorCode::InvalidArgument;
  CK(cudaFree(buf));
  std::printf("    %s\n", ok ? "PASS" : "FAIL");
  return ok;
}

// ---- timing -------------------------------------------------------------------------
static void bench(bool causal) {
  const int B = 4, H = 16, S = 4096, D = 128;
  const fa::DType dt = fa::DType::BF16;
  std::mt19937 rng(7);
  Case c{"bench", dt, B, S, S, H, H, D, causal, -1, -1, 0.f, false, false};
  const size_t n = size_t(B) * S * H * D;
  std::vector<uint16_t> host(n);
  std::normal_distribution<float> nd(0.f, 1.f);
  std::vector<void*> bufs;
  auto rnd = [&]() {
    for (auto& x : host) x = to16(nd(rng), dt);
    void* p;
    CK(cudaMalloc(&p, n * 2));
    CK(cudaMemcpy(p, host.data(), n * 2, cudaMemcpyHostToDevice));
    bufs.push_back(p);
    return p;
  };
  void *q = rnd(), *k = rnd(), *v = rnd(), *dout = rnd(), *o, *dq, *dk, *dv;
  float* lse;
  for (void** p : {&o, &dq, &dk, &dv}) {
    CK(cudaMalloc(p, n * 2));
    bufs.push_back(*p);
  }
  CK(cudaMalloc(&lse, size_t(B) * H * S * 4));
  const fd::Strides str{int64_t(S) * H * D, int64_t(H) * D, D};
  fd::FwdParams fp;
  static_cast<fd::AttnParams&>(fp) = base_params(c);
  fp.q = q, fp.k = k, fp.v = v, fp.q_str = fp.k_str = fp.v_str = str;
  fp.out = o, fp.o_str = str, fp.lse = lse;
  fd::BwdParams bp;
  static_cast<fd::AttnParams&>(bp) = base_params(c);
  bp.q = q, bp.k = k, bp.v = v, bp.q_str = bp.k_str = bp.v_str = str;
  bp.out = o, bp.o_str = str, bp.dout = dout, bp.do_str = str, bp.lse = lse;
  bp.dq = dq, bp.dk = dk, bp.dv = dv, bp.dq_str = bp.dk_str = bp.dv_str = str;

  const double fwd_flops = 4.0 * B * H * double(S) * S * D / (causal ? 2 : 1);
  auto time = [&](const char* what, double flops, const std::function<fa::Status()>& f) {
    cudaEvent_t e0, e1;
    CK(cudaEventCreate(&e0));
    CK(cudaEventCreate(&e1));
    for (int i = 0; i < 3; ++i) {
      fa::Status s = f();
      if (!s.ok()) {
        std::printf("%s: %s\n", what, s.message.c_str());
        return;
      }
    }
    std::vector<float> ms;
    for (int i = 0; i < 20; ++i) {
      CK(cudaEventRecord(e0));
      f();
      CK(cudaEventRecord(e1));
      CK(cudaEventSynchronize(e1));
      float t;
      CK(cudaEventElapsedTime(&t, e0, e1));
      ms.push_back(t);
    }
    CK(cudaGetLastError());
    std::sort(ms.begin(), ms.end());
    const double med = ms[ms.size() / 2];
    std::printf("  %-28s %s: median %8.3f ms  %7.1f TFLOP/s  (min %.3f ms)\n", what, causal ? "causal    " : "non-causal",
                med, flops / (med * 1e-3) / 1e12, ms.front());
    CK(cudaEventDestroy(e0));
    CK(cudaEventDestroy(e1));
  };
  time("forward", fwd_flops, [&] { return fd::cuda::forward(fp); });
  bp.deterministic = false;
  time("backward", 2.5 * fwd_flops, [&] { return fd::cuda::backward(bp); });
  bp.deterministic = true;
  time("backward (deterministic)", 2.5 * fwd_flops, [&] { return fd::cuda::backward(bp); });
  for (void* p : bufs) CK(cudaFree(p));
  CK(cudaFree(lse));
}

int main(int argc, char** argv) {
  bool do_check = true, do_bench = true;
  if (argc > 1 && std::strcmp(argv[1], "--check") == 0) do_bench = false;
  if (argc > 1 && std::strcmp(argv[1], "--bench") == 0) do_check = false;
  if (!fd::cuda::device_available()) {
    std::printf("no CUDA device\n");
    return 2;
  }
  cudaDeviceProp prop;
  CK(cudaGetDeviceProperties(&prop, 0));
  std::printf("device: %s (sm_%d%d, %d SMs)\n", prop.name, prop.major, prop.minor, prop.multiProcessorCount);
  bool all = true;
  if (do_check) {
    using fa::DType;
    const DType bf = DType::BF16, hf = DType::F16;
    const std::vector<Case> cases = {
        {"tiny", bf, 1, 1, 1, 1, 1, 64, false, -1, -1, 0.f, false, false},
        {"odd17", hf, 2, 17, 17, 4, 2, 32, true, -1, -1, 0.f, false, false},
        {"gqa8", bf, 1, 113, 267, 8, 1, 128, false, -1, -1, 0.f, false, false},
        {"sq>sk causal", hf, 1, 267, 113, 2, 1, 128, true, -1, -1, 0.f, false, false},
        {"long causal", bf, 1, 1030, 1030, 2, 2, 256, true, -1, -1, 0.f, false, false},
        {"window", bf, 1, 113, 113, 2, 2, 80, false, 32, 8, 0.f, false, false},
        {"softcap bhsd", hf, 1, 267, 1030, 4, 2, 160, false, -1, -1, 30.f, true, false},
        {"sk17", bf, 1, 1030, 17, 2, 1, 40, false, -1, -1, 0.f, false, false},
        {"bhsd causal", bf, 2, 267, 267, 8, 8, 128, true, -1, -1, 0.f, true, false},
        {"local", hf, 1, 1030, 1030, 8, 1, 64, true, 100, -1, 0.f, false, false},
        {"det gqa", bf, 1, 267, 1030, 4, 2, 128, true, -1, -1, 0.f, false, true},
        {"det d96", bf, 1, 17, 1030, 2, 2, 96, false, -1, -1, 0.f, false, true},
        {"softcap d256", hf, 1, 113, 113, 4, 2, 256, false, -1, -1, 5.f, false, true},
        {"d192 fp16", hf, 2, 113, 267, 2, 1, 192, true, -1, -1, 0.f, false, false},
    };
    std::mt19937 rng(1234);
    int passed = 0;
    const char* filter = (!do_bench && argc > 2) ? argv[2] : "";
    int run = 0;
    for (const Case& c : cases) {
      if (c.name.find(filter) == std::string::npos) continue;
      ++run;
      passed += run_case(c, rng);
    }
    const bool errs = check_errors();
    all = passed == run && errs;
    std::printf("checks: %d/%d cases passed, error paths %s -> %s\n", passed, run, errs ? "ok" : "FAIL",
                all ? "PASS" : "FAIL");
  }
  if (do_bench) {
    std::printf("timing: B=4 H=16 S=4096 D=128 bf16 (FLOPs 4*B*H*S^2*D, /2 causal; bwd x2.5)\n");
    bench(false);
    bench(true);
  }
  return all ? 0 : 1;
}
