// Self-check and timing of the CUDA backend's sm80 kernels, standalone: calls
// flashattn::detail::cuda::{forward,backward} with device tensors and compares
// against attention computed here on the CPU (double precision, plus a naive
// version in the input dtype that rounds P and dS as kernels do). Criterion
// (DESIGN.md): max|gpu - ref| <= 2 * max|naive_dtype - ref| + atol.
//
//   sm80_selfcheck            checks, then timings
//   sm80_selfcheck --check    checks only
//   sm80_selfcheck --bench    timings only
// Exit status 0 only when every check passes.
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <functional>
#include <limits>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "common/params.hpp"
#include "cuda/cuda_backend.hpp"

namespace fa = flashattn;
namespace fd = flashattn::detail;

#define CK(x)                                                                                  \
  do {                                                                                         \
    cudaError_t e_ = (x);                                                                      \
    if (e_ != cudaSuccess) {                                                                   \
      std::fprintf(stderr, "%s:%d %s: %s\n", __FILE__, __LINE__, #x, cudaGetErrorString(e_)); \
      std::exit(2);                                                                            \
    }                                                                                          \
  } while (0)

// ---- 16-bit conversions on the host --------------------------------------------------
static uint16_t to16(float x, fa::DType dt) {
  if (dt == fa::DType::BF16) {
    __nv_bfloat16 h = __float2bfloat16_rn(x);
    uint16_t u;
    std::memcpy(&u, &h, 2);
    return u;
  }
  __half h = __float2half_rn(x);
  uint16_t u;
  std::memcpy(&u, &h, 2);
  return u;
}
static float from16(uint16_t u, fa::DType dt) {
  if (dt == fa::DType::BF16) {
    __nv_bfloat16 h;
    std::memcpy(&h, &u, 2);
    return __bfloat162float(h);
  }
  __half h;
  std::memcpy(&h, &u, 2);
  return __half2float(h);
}
static float round16(float x, fa::DType dt) { return from16(to16(x, dt), dt); }

static void parallel_for(int n, const std::function<void(int)>& f) {
  const int nt = std::max(1u, std::min(32u, std::thread::hardware_concurrency()));
  std::vector<std::thread> th;
  for (int t = 0; t < nt; ++t)
    th.emplace_back([&, t] {
      for (int i = t; i < n; i += nt) f(i);
    });
  for (auto& x : th) x.join();
}

// ---- the problem --------------------------------------------------------------------
struct Case {
  std::string name;
  fa::DType dt;
  int B, Sq, Sk, Hq, Hkv, D;
  bool causal;
  int wl, wr;  // window, -1 unbounded
  float softcap;
  bool bhsd;  // physical layout [B, H, S, D] instead of [B, S, H, D]
  bool det;
};

// Host copy of a logical [B, S, H, D] tensor with its physical strides.
struct HostT {
  int B, S, H, D;
  bool bhsd;
  std::vector<float> val;  // logical order [B][S][H][D], already rounded to the dtype
  fd::Strides str() const {
    fd::Strides s;
    if (bhsd) {
      s.batch = int64_t(H) * S * D;
      s.head = int64_t(S) * D;
      s.seq = D;
    } else {
      s.batch = int64_t(S) * H * D;
      s.seq = int64_t(H) * D;
      s.head = D;
    }
    return s;
  }
  size_t numel() const { return size_t(B) * S * H * D; }
  size_t phys(int b, int s, int h, int d) const {
    fd::Strides st = str();
    return size_t(b * st.batch + s * st.seq + h * st.head + d);
  }
  float& at(int b, int s, int h, int d) { return val[((size_t(b) * S + s) * H + h) * D + d]; }
  float at(int b, int s, int h, int d) const { return val[((size_t(b) * S + s) * H + h) * D + d]; }
};

static HostT make_random(int B, int S, int H, int D, bool bhsd, fa::DType dt, std::mt19937& rng) {
  HostT t{B, S, H, D, bhsd, {}};
  t.val.resize(t.numel());
  std::normal_distribution<float> nd(0.f, 1.f);
  for (auto& x : t.val) x = round16(nd(rng), dt);
  return t;
}

struct DevT {
  void* ptr = nullptr;
  size_t bytes = 0;
};
static DevT upload(const HostT& t, fa::DType dt) {
  std::vector<uint16_t> buf(t.numel());
  for (int b = 0; b < t.B; ++b)
    for (int s = 0; s < t.S; ++s)
      for (int h = 0; h < t.H; ++h)
        for (int d = 0; d < t.D; ++d) buf[t.phys(b, s, h, d)] = to16(t.at(b, s, h, d), dt);
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
  HostT t = like;
  for (int b = 0; b < t.B; ++b)
    for (int s = 0; s < t.S; ++s)
      for (int h = 0; h < t.H; ++h)
        for (int dd = 0; dd < t.D; ++dd) t.at(b, s, h, dd) = from16(buf[t.phys(b, s, h, dd)], dt);
  return t;
}

// ---- CPU attention: exact (double) and naive in the dtype ---------------------------
static bool visible(const Case& c, int i, int j) {
  const int off = c.Sk - c.Sq;
  const int right = c.causal ? 0 : c.wr;
  if (c.wl >= 0 && j < i + off - c.wl) return false;
  if (right >= 0 && j > i + off + right) return false;
  return true;
}

struct Grads {
  HostT o, dq, dk, dv;
  std::vector<double> lse;  // [B, Hq, Sq]
};

// emulate = false: double everywhere. emulate = true: float, with P, dP and dS
// rounded to the dtype before each product and the outputs rounded.
static Grads cpu_attention(const Case& c, const HostT& q, const HostT& k, const HostT& v, const HostT& dout,
                           bool emulate) {
  const int B = c.B, Sq = c.Sq, Sk = c.Sk, Hq = c.Hq, Hkv = c.Hkv, D = c.D, G = Hq / Hkv;
  const double scale = 1.0 / std::sqrt(double(D));
  Grads g{q, q, k, v, std::vector<double>(size_t(B) * Hq * Sq)};
  std::fill(g.o.val.begin(), g.o.val.end(), 0.f);
  std::fill(g.dq.val.begin(), g.dq.val.end(), 0.f);
  std::fill(g.dk.val.begin(), g.dk.val.end(), 0.f);
  std::fill(g.dv.val.begin(), g.dv.val.end(), 0.f);
  auto rd = [&](double x) { return emulate ? double(round16(float(x), c.dt)) : x; };
  // One task per (b, kv head): owns dk/dv of that head and dq/o of its group.
  std::vector<std::vector<double>> dkacc(size_t(B) * Hkv), dvacc(size_t(B) * Hkv);
  parallel_for(B * Hkv, [&](int task) {
    const int b = task / Hkv, hk = task % Hkv;
    std::vector<double> dk(size_t(Sk) * D, 0.0), dv(size_t(Sk) * D, 0.0);
    std::vector<double> s(Sk), p(Sk), th(Sk), dp(Sk), ds(Sk), o(D);
    for (int h = hk * G; h < (hk + 1) * G; ++h) {
      for (int i = 0; i < Sq; ++i) {
        double mx = -INFINITY;
        for (int j = 0; j < Sk; ++j) {
          double dot = 0;
          for (int d = 0; d < D; ++d) dot += double(q.at(b, i, h, d)) * k.at(b, j, hk, d);
          if (emulate) dot = float(dot);
          double x = scale * dot;
          th[j] = 0;
          if (c.softcap > 0) {
            th[j] = std::tanh(x / c.softcap);
            x = c.softcap * th[j];
          }
          s[j] = x;
          if (visible(c, i, j)) mx = std::max(mx, x);
        }
        double sum = 0;
        for (int j = 0; j < Sk; ++j) sum += visible(c, i, j) ? std::exp(s[j] - mx) : 0.0;
        const double lse = mx == -INFINITY ? -INFINITY : mx + std::log(sum);
        g.lse[(size_t(b) * Hq + h) * Sq + i] = lse;
        for (int j = 0; j < Sk; ++j) p[j] = (visible(c, i, j) && sum > 0) ? std::exp(s[j] - lse) : 0.0;
        // forward output
        std::fill(o.begin(), o.end(), 0.0);
        for (int j = 0; j < Sk; ++j) {
          if (p[j] == 0) continue;
          const double pj = rd(p[j]);
          for (int d = 0; d < D; ++d) o[d] += pj * v.at(b, j, hk, d);
        }
        for (int d = 0; d < D; ++d) g.o.at(b, i, h, d) = float(rd(o[d]));
        // backward: Di = rowsum(dO * O), dP = dO V^T, dS = P (dP - Di)
        double Di = 0;
        for (int d = 0; d < D; ++d) Di += double(dout.at(b, i, h, d)) * (emulate ? g.o.at(b, i, h, d) : o[d]);
        for (int j = 0; j < Sk; ++j) {
          if (p[j] == 0) {
            ds[j] = 0;
            continue;
          }
          double acc = 0;
          for (int d = 0; d < D; ++d) acc += double(dout.at(b, i, h, d)) * v.at(b, j, hk, d);
          double pj = p[j];
          double x = pj * (rd(acc) - Di);
          if (c.softcap > 0) x *= 1.0 - th[j] * th[j];
          ds[j] = rd(x);
          const double pr = rd(pj);
          for (int d = 0; d < D; ++d) dv[size_t(j) * D + d] += pr * dout.at(b, i, h, d);
        }
        for (int d = 0; d < D; ++d) {
          double acc = 0;
          for (int j = 0; j < Sk; ++j)
            if (ds[j] != 0) acc += ds[j] * k.at(b, j, hk, d);
          g.dq.at(b, i, h, d) = float(rd(acc * scale));
        }
        for (int j = 0; j < Sk; ++j) {
          if (ds[j] == 0) continue;
          for (int d = 0; d < D; ++d) dk[size_t(j) * D + d] += ds[j] * q.at(b, i, h, d);
        }
      }
    }
    for (int j = 0; j < Sk; ++j)
      for (int d = 0; d < D; ++d) {
        g.dk.at(b, j, hk, d) = float(rd(dk[size_t(j) * D + d] * scale));
        g.dv.at(b, j, hk, d) = float(rd(dv[size_t(j) * D + d]));
      }
  });
  return g;
}

// ---- comparisons --------------------------------------------------------------------
struct Cmp {
  double err = 0, naive = 0, maxref = 0;
  bool nan = false;
};
static Cmp compare(const HostT& got, const HostT& ref, const HostT& naive) {
  Cmp c;
  for (size_t i = 0; i < ref.val.size(); ++i) {
    if (!std::isfinite(got.val[i])) c.nan = true;
    c.err = std::max(c.err, double(std::fabs(got.val[i] - ref.val[i])));
    c.naive = std::max(c.naive, double(std::fabs(naive.val[i] - ref.val[i])));
    c.maxref = std::max(c.maxref, double(std::fabs(ref.val[i])));
  }
  return c;
}
static bool report(const char* what, const Cmp& c) {
  const double atol = 1e-3 * c.maxref + 1e-5;
  const bool ok = !c.nan && c.err <= 2 * c.naive + atol;
  std::printf("    %-4s max|err| %.3e  naive %.3e  max|ref| %.3e  %s%s\n", what, c.err, c.naive, c.maxref,
              ok ? "ok" : "FAIL", c.nan ? " (NaN/inf)" : "");
  return ok;
}

static fd::AttnParams base_params(const Case& c) {
  fd::AttnParams p;
  p.dtype = c.dt;
  p.device = fa::Device::CUDA;
  p.device_index = 0;
  p.stream = nullptr;
  p.batch = c.B;
  p.seqlen_q = c.Sq;
  p.seqlen_k = c.Sk;
  p.heads_q = c.Hq;
  p.heads_kv = c.Hkv;
  p.head_dim = c.D;
  p.scale = float(1.0 / std::sqrt(double(c.D)));
  p.softcap = c.softcap;
  p.window_left = c.wl;
  p.window_right = c.causal ? 0 : c.wr;
  p.causal = c.causal;
  return p;
}

static bool run_case(const Case& c, std::mt19937& rng) {
  std::printf("[%s] %s B=%d Sq=%d Sk=%d Hq=%d Hkv=%d D=%d%s window=(%d,%d) softcap=%g%s%s\n", c.name.c_str(),
              c.dt == fa::DType::BF16 ? "bf16" : "fp16", c.B, c.Sq, c.Sk, c.Hq, c.Hkv, c.D,
              c.causal ? " causal" : "", c.wl, c.wr, c.softcap, c.bhsd ? " BHSD" : "",
              c.det ? " deterministic" : "");
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
  double lerr = 0;
  bool lbad = false;
  for (size_t i = 0; i < lse.size(); ++i) {
    const double r = ref.lse[i];
    if (std::isinf(r)) {
      if (!(std::isinf(lse[i]) && lse[i] < 0)) lbad = true;
    } else if (!std::isfinite(lse[i])) {
      lbad = true;
    } else {
      lerr = std::max(lerr, std::fabs(lse[i] - r));
    }
  }
  const bool lok = !lbad && lerr <= 1e-3;
  std::printf("    LSE  max|err| %.3e%s  %s\n", lerr, lbad ? " (wrong -inf/NaN)" : "", lok ? "ok" : "FAIL");
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
  Case c{"err", fa::DType::BF16, 1, 16, 16, 1, 1, 64, false, -1, -1, 0.f, false, false};
  fd::AttnParams p = base_params(c);
  void* buf = nullptr;
  CK(cudaMalloc(&buf, 1 << 20));
  p.q = p.k = p.v = buf;
  p.q_str = p.k_str = p.v_str = {16 * 64, 64, 64};
  p.dtype = fa::DType::F32;
  fa::Status s = fd::cuda::can_implement(p);
  std::printf("[errors] fp32: %s\n", s.message.c_str());
  ok = ok && s.code == fa::ErrorCode::Unsupported;
  p.dtype = fa::DType::BF16;
  p.head_dim = 264;
  s = fd::cuda::can_implement(p);
  std::printf("[errors] hdim 264: %s\n", s.message.c_str());
  ok = ok && s.code == fa::ErrorCode::Unsupported;
  p.head_dim = 64;
  p.k = static_cast<char*>(buf) + 8;
  s = fd::cuda::can_implement(p);
  std::printf("[errors] misaligned k: %s\n", s.message.c_str());
  ok = ok && s.code == fa::ErrorCode::InvalidArgument;
  p.k = buf;
  p.v_str.seq = 68;
  s = fd::cuda::can_implement(p);
  std::printf("[errors] v seq stride 68: %s\n", s.message.c_str());
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
    for (const Case& c : cases) passed += run_case(c, rng);
    const bool errs = check_errors();
    all = passed == int(cases.size()) && errs;
    std::printf("checks: %d/%zu cases passed, error paths %s -> %s\n", passed, cases.size(), errs ? "ok" : "FAIL",
                all ? "PASS" : "FAIL");
  }
  if (do_bench) {
    std::printf("timing: B=4 H=16 S=4096 D=128 bf16 (FLOPs 4*B*H*S^2*D, /2 causal; bwd x2.5)\n");
    bench(false);
    bench(true);
  }
  return all ? 0 : 1;
}
