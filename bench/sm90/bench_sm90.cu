// Standalone check + benchmark of the Hopper (sm_90a) forward.
//
//   bench_sm90 [--check] [--bench] [--quick] [--reps N] [--csv FILE]
//              [--hdim D] [--causal 0|1] [--tag NAME]   (bench filters, CSV label)
//   (no flag: --check then --bench)
//
// --check: forward output and LSE against a naive CPU computation on small
//   shapes (odd lengths, Sq != Sk both ways, causal incl. rows that see
//   nothing, sliding window, GQA 1/2/8, hdim 64/128/256, fp16/bf16, three
//   memory layouts). Rule (DESIGN.md): max|out - ref| <= 2 * max|naive - ref|
//   + 1e-5 * max(1, max|ref|), ref in fp64 on the dtype-rounded inputs, naive
//   = the unfused algorithm with fp32 accumulation and P rounded to the dtype
//   before P.V. Outputs are poisoned with NaN before each run; NaN never
//   passes. Prints PASS/FAIL per case; exit code 1 if any case fails.
// --bench: the papers' grid, bf16: 16k tokens (batch = 16384/seqlen), heads =
//   2048/hdim, seqlen 512..16384, hdim 64/128/256, causal and not; CUDA
//   events around each launch, 3 warm-ups, median of --reps (default 30);
//   TFLOP/s = 4*B*H*S^2*D / t, halved for causal. Prints a CSV.
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "common/params.hpp"
#include "cuda/sm90/sm90_forward.hpp"

using flashattn::DType;
using flashattn::Status;
using flashattn::detail::FwdParams;
using flashattn::detail::Strides;
namespace sm90 = flashattn::detail::cuda::sm90;

#define CK(x)                                                                              \
  do {                                                                                     \
    cudaError_t e_ = (x);                                                                  \
    if (e_ != cudaSuccess) {                                                               \
      std::fprintf(stderr, "CUDA error %s at %s:%d: %s\n", cudaGetErrorName(e_), __FILE__, \
                   __LINE__, cudaGetErrorString(e_));                                      \
      std::exit(2);                                                                        \
    }                                                                                      \
  } while (0)

namespace {

// ---- dtype helpers (host) ---------------------------------------------------

uint16_t to_bits(float x, DType dt) {
  uint16_t b;
  if (dt == DType::BF16) {
    __nv_bfloat16 h = __float2bfloat16_rn(x);
    std::memcpy(&b, &h, 2);
  } else {
    __half h = __float2half_rn(x);
    std::memcpy(&b, &h, 2);
  }
  return b;
}

float from_bits(uint16_t b, DType dt) {
  if (dt == DType::BF16) {
    __nv_bfloat16 h;
    std::memcpy(&h, &b, 2);
    return __bfloat162float(h);
  }
  __half h;
  std::memcpy(&h, &b, 2);
  return __half2float(h);
}

float round_dt(float x, DType dt) { return from_bits(to_bits(x, dt), dt); }

const char* dt_name(DType dt) { return dt == DType::BF16 ? "bf16" : "fp16"; }

template <class F>
void parallel_for(int n, F f) {
  int nt = std::max(1u, std::min(32u, std::thread::hardware_concurrency()));
  std::atomic<int> next{0};
  std::vector<std::thread> ts;
  for (int t = 0; t < nt; ++t) {
    ts.emplace_back([&] {
      for (int i = next++; i < n; i = next++) f(i);
    });
  }
  for (auto& t : ts) t.join();
}

// ---- check ----------------------------------------------------------------------

enum Layout { kBSHD = 0, kBHSD = 1, kPackedQKV = 2 };
const char* layout_name(int l) { return l == kBSHD ? "bshd" : l == kBHSD ? "bhsd" : "packed-qkv"; }

struct Case {
  int B, Sq, Sk, Hq, Hkv, D;
  bool causal;
  int left, right;  // window (-1 unbounded); causal forces right = 0
  int layout;
  bool no_lse = false;  // pass lse = nullptr (O only)
};

// Logical tensors are float [b][s][h][d] (values already rounded to the dtype).
struct Logical {
  int B, S, H, D;
  std::vector<float> v;
  float at(int b, int s, int h, int d) const { return v[((size_t(b) * S + s) * H + h) * D + d]; }
};

struct DeviceView {
  uint16_t* ptr;  // element pointer inside `buffer`
  Strides str;
};

// Independent of src/common/mask.hpp on purpose.
bool visible(const Case& c, int i, int j) {
  const int right = c.causal ? 0 : c.right;
  const long diag = long(i) + c.Sk - c.Sq;
  if (right >= 0 && j > diag + right) return false;
  if (c.left >= 0 && j < diag - c.left) return false;
  return true;
}

struct RefOut {
  std::vector<double> out, lse;       // fp64 reference
  std::vector<float> naive, naive_lse;  // same-dtype naive
};

RefOut reference(const Case& c, const Logical& q, const Logical& k, const Logical& v, float scale,
                 DType dt) {
  RefOut r;
  const size_t no = size_t(c.B) * c.Sq * c.Hq * c.D;
  r.out.assign(no, 0.0);
  r.naive.assign(no, 0.f);
  r.lse.assign(size_t(c.B) * c.Hq * c.Sq, 0.0);
  r.naive_lse.assign(size_t(c.B) * c.Hq * c.Sq, 0.f);
  const int group = c.Hq / c.Hkv;
  parallel_for(c.B * c.Hq * c.Sq, [&](int idx) {
    const int i = idx % c.Sq, h = (idx / c.Sq) % c.Hq, b = idx / (c.Sq * c.Hq);
    const int hk = h / group;
    std::vector<double> sd(c.Sk);
    std::vector<float> sf(c.Sk);
    double md = -INFINITY;
    float mf = -INFINITY;
    for (int j = 0; j < c.Sk; ++j) {
      double accd = 0;
      float accf = 0;
      for (int d = 0; d < c.D; ++d) {
        accd += double(q.at(b, i, h, d)) * double(k.at(b, j, hk, d));
        accf += q.at(b, i, h, d) * k.at(b, j, hk, d);
      }
      const bool vis = visible(c, i, j);
      sd[j] = vis ? accd * double(scale) : -INFINITY;
      sf[j] = vis ? accf * scale : -INFINITY;
      md = std::max(md, sd[j]);
      mf = std::max(mf, sf[j]);
    }
    const size_t lidx = (size_t(b) * c.Hq + h) * c.Sq + i;
    double* od = &r.out[((size_t(b) * c.Sq + i) * c.Hq + h) * c.D];
    float* of = &r.naive[((size_t(b) * c.Sq + i) * c.Hq + h) * c.D];
    if (md == -INFINITY) {  // nothing visible: O = 0, LSE = -inf
      r.lse[lidx] = -INFINITY;
      r.naive_lse[lidx] = -INFINITY;
      return;
    }
    double ld = 0;
    float lf = 0;
    for (int j = 0; j < c.Sk; ++j) {
      sd[j] = std::exp(sd[j] - md);
      sf[j] = std::exp(sf[j] - mf);
      ld += sd[j];
      lf += sf[j];
    }
    r.lse[lidx] = md + std::log(ld);
    r.naive_lse[lidx] = mf + std::log(lf);
    std::vector<float> accf(c.D, 0.f);
    for (int j = 0; j < c.Sk; ++j) {
      const double pd = sd[j] / ld;
      const float pf = round_dt(sf[j] / lf, dt);
      if (pd == 0 && pf == 0) continue;
      for (int d = 0; d < c.D; ++d) {
        od[d] += pd * double(v.at(b, j, hk, d));
        accf[d] += pf * v.at(b, j, hk, d);
      }
    }
    for (int d = 0; d < c.D; ++d) of[d] = round_dt(accf[d], dt);
  });
  return r;
}

Logical random_logical(int B, int S, int H, int D, DType dt, std::mt19937& rng) {
  std::normal_distribution<float> nd(0.f, 1.f);
  Logical t{B, S, H, D, std::vector<float>(size_t(B) * S * H * D)};
  for (float& x : t.v) x = round_dt(nd(rng), dt);
  return t;
}

// Scatter a logical tensor into a host image of a device buffer.
void scatter(std::vector<uint16_t>& img, size_t offset, const Strides& st, const Logical& t,
             DType dt) {
  for (int b = 0; b < t.B; ++b)
    for (int s = 0; s < t.S; ++s)
      for (int h = 0; h < t.H; ++h)
        for (int d = 0; d < t.D; ++d)
          img[offset + b * st.batch + s * st.seq + h * st.head + d] = to_bits(t.at(b, s, h, d), dt);
}

struct Verdict {
  double err = 0, naive = 0, maxref = 0, tol = 0;
  bool nan = false, pass = false;
};

Verdict judge(size_t n, const std::vector<float>& got, const std::vector<float>& naive,
              const std::vector<double>& ref, double rel_atol) {
  Verdict v;
  auto diff = [](double a, double b) {
    if (std::isinf(a) && std::isinf(b) && a == b) return 0.0;
    return std::fabs(a - b);
  };
  for (size_t i = 0; i < n; ++i) {
    if (std::isnan(got[i])) v.nan = true;
    if (std::isfinite(ref[i])) v.maxref = std::max(v.maxref, std::fabs(ref[i]));
    const double e = diff(got[i], ref[i]);
    v.err = std::max(v.err, std::isnan(e) ? INFINITY : e);
    const double ne = diff(naive[i], ref[i]);
    if (!std::isnan(ne)) v.naive = std::max(v.naive, ne);
  }
  v.tol = 2.0 * v.naive + rel_atol * std::max(1.0, v.maxref);
  v.pass = !v.nan && v.err <= v.tol;
  return v;
}

bool run_case(const Case& c, DType dt, std::mt19937& rng) {
  const float scale = 1.0f / std::sqrt(float(c.D));
  Logical q = random_logical(c.B, c.Sq, c.Hq, c.D, dt, rng);
  Logical k = random_logical(c.B, c.Sk, c.Hkv, c.D, dt, rng);
  Logical v = random_logical(c.B, c.Sk, c.Hkv, c.D, dt, rng);

  // Device layout.
  Strides qs, ks, vs, os;
  size_t qoff = 0, koff = 0, voff = 0, in_elems = 0;
  const size_t nq = size_t(c.B) * c.Sq * c.Hq * c.D, nk = size_t(c.B) * c.Sk * c.Hkv * c.D;
  if (c.layout == kPackedQKV) {  // [B, S, 3, H, D]; needs Sq == Sk, Hq == Hkv
    const int64_t H = c.Hq, D = c.D, S = c.Sq;
    qs = ks = vs = Strides{S * 3 * H * D, 3 * H * D, D};
    qoff = 0, koff = size_t(H * D), voff = size_t(2 * H * D);
    in_elems = size_t(c.B) * S * 3 * H * D;
    os = Strides{H * S * D, D, S * D};  // BHSD output
  } else if (c.layout == kBHSD) {
    auto bhsd = [](int64_t S, int64_t H, int64_t D) { return Strides{H * S * D, D, S * D}; };
    qs = bhsd(c.Sq, c.Hq, c.D), ks = bhsd(c.Sk, c.Hkv, c.D), vs = ks, os = qs;
    qoff = 0, koff = nq, voff = nq + nk, in_elems = nq + 2 * nk;
  } else {
    auto bshd = [](int64_t S, int64_t H, int64_t D) { return Strides{S * H * D, H * D, D}; };
    qs = bshd(c.Sq, c.Hq, c.D), ks = bshd(c.Sk, c.Hkv, c.D), vs = ks, os = qs;
    qoff = 0, koff = nq, voff = nq + nk, in_elems = nq + 2 * nk;
  }
  std::vector<uint16_t> img(in_elems, to_bits(NAN, dt));
  scatter(img, qoff, qs, q, dt);
  scatter(img, koff, ks, k, dt);
  scatter(img, voff, vs, v, dt);
  uint16_t* d_in = nullptr;
  uint16_t* d_out = nullptr;
  float* d_lse = nullptr;
  const size_t nlse = size_t(c.B) * c.Hq * c.Sq;
  CK(cudaMalloc(&d_in, std::max<size_t>(in_elems, 1) * 2));
  CK(cudaMalloc(&d_out, std::max<size_t>(nq, 1) * 2));
  CK(cudaMalloc(&d_lse, std::max<size_t>(nlse, 1) * 4));
  CK(cudaMemcpy(d_in, img.data(), in_elems * 2, cudaMemcpyHostToDevice));
  CK(cudaMemset(d_out, 0xFF, std::max<size_t>(nq, 1) * 2));  // NaN in fp16 and bf16
  CK(cudaMemset(d_lse, 0xFF, std::max<size_t>(nlse, 1) * 4));  // NaN

  FwdParams p;
  p.dtype = dt;
  p.device = flashattn::Device::CUDA;
  CK(cudaGetDevice(&p.device_index));
  p.stream = nullptr;
  p.batch = c.B, p.seqlen_q = c.Sq, p.seqlen_k = c.Sk;
  p.heads_q = c.Hq, p.heads_kv = c.Hkv, p.head_dim = c.D;
  p.q = d_in + qoff, p.k = d_in + koff, p.v = d_in + voff;
  p.q_str = qs, p.k_str = ks, p.v_str = vs;
  p.scale = scale;
  p.window_left = c.left;
  p.window_right = c.causal ? 0 : c.right;
  p.causal = c.causal;
  p.out = d_out, p.o_str = os;
  p.lse = c.no_lse ? nullptr : d_lse;

  char desc[256];
  std::snprintf(desc, sizeof desc, "%s D=%d B=%d Sq=%d Sk=%d Hq=%d Hkv=%d causal=%d win=(%d,%d) %s",
                dt_name(dt), c.D, c.B, c.Sq, c.Sk, c.Hq, c.Hkv, int(c.causal), c.left,
                c.causal ? 0 : c.right, layout_name(c.layout));
  Status st = sm90::can_implement(p);
  if (st.ok()) st = sm90::run_forward(p);
  if (!st.ok()) {
    std::printf("FAIL %s: status %d: %s\n", desc, int(st.code), st.message.c_str());
    cudaFree(d_in), cudaFree(d_out), cudaFree(d_lse);
    return false;
  }
  CK(cudaGetLastError());
  CK(cudaDeviceSynchronize());

  std::vector<uint16_t> oimg(nq);
  std::vector<float> lse(nlse);
  CK(cudaMemcpy(oimg.data(), d_out, nq * 2, cudaMemcpyDeviceToHost));
  CK(cudaMemcpy(lse.data(), d_lse, nlse * 4, cudaMemcpyDeviceToHost));
  cudaFree(d_in), cudaFree(d_out), cudaFree(d_lse);

  std::vector<float> out(nq);
  for (int b = 0; b < c.B; ++b)
    for (int s = 0; s < c.Sq; ++s)
      for (int h = 0; h < c.Hq; ++h)
        for (int d = 0; d < c.D; ++d)
          out[((size_t(b) * c.Sq + s) * c.Hq + h) * c.D + d] =
              from_bits(oimg[b * os.batch + s * os.seq + h * os.head + d], dt);

  RefOut r = reference(c, q, k, v, scale, dt);
  Verdict vo = judge(nq, out, r.naive, r.out, 1e-5);
  Verdict vl = c.no_lse ? Verdict{0, 0, 0, 0, false, true}
                        : judge(nlse, lse, r.naive_lse, r.lse, 1e-4);
  const bool pass = vo.pass && vl.pass;
  std::printf("%s %s  out err %.3g (naive %.3g, tol %.3g)%s  lse err %.3g (tol %.3g)%s\n",
              pass ? "PASS" : "FAIL", desc, vo.err, vo.naive, vo.tol, vo.nan ? " NaN" : "", vl.err,
              vl.tol, vl.nan ? " NaN" : "");
  return pass;
}

// can_implement must refuse what TMA cannot address, naming the tensor.
int run_argument_checks() {
  int fails = 0;
  uint16_t* buf = nullptr;
  CK(cudaMalloc(&buf, 1 << 20));
  auto base = [&]() {
    FwdParams p;
    p.dtype = DType::BF16;
    p.device = flashattn::Device::CUDA;
    CK(cudaGetDevice(&p.device_index));
    p.batch = 1, p.seqlen_q = 16, p.seqlen_k = 16, p.heads_q = 2, p.heads_kv = 2, p.head_dim = 64;
    const Strides st{16 * 2 * 64, 2 * 64, 64};
    p.q = buf, p.k = buf + 4096, p.v = buf + 8192, p.out = buf + 12288;
    p.q_str = p.k_str = p.v_str = p.o_str = st;
    p.scale = 0.125f;
    return p;
  };
  struct Expect {
    const char* what;
    FwdParams p;
    flashattn::ErrorCode code;
    const char* needle;
  };
  std::vector<Expect> ex;
  ex.push_back({"baseline", base(), flashattn::ErrorCode::Ok, ""});
  {
    FwdParams p = base();
    p.k = buf + 4096 + 1;  // 2-byte aligned only
    ex.push_back({"misaligned k pointer", p, flashattn::ErrorCode::InvalidArgument, "k:"});
  }
  {
    FwdParams p = base();
    p.v_str.seq = 2 * 64 + 4;  // 264 bytes
    ex.push_back({"v seq stride not 16-byte multiple", p, flashattn::ErrorCode::InvalidArgument, "v:"});
  }
  {
    FwdParams p = base();
    p.o_str.head = 68;
    ex.push_back({"out head stride 68", p, flashattn::ErrorCode::InvalidArgument, "out:"});
  }
  {
    FwdParams p = base();
    p.head_dim = 96;
    ex.push_back({"head_dim 96", p, flashattn::ErrorCode::Unsupported, "head_dim"});
  }
  {
    FwdParams p = base();
    p.softcap = 30.f;
    ex.push_back({"softcap", p, flashattn::ErrorCode::Unsupported, "softcap"});
  }
  {
    FwdParams p = base();
    p.dtype = DType::F32;
    ex.push_back({"fp32", p, flashattn::ErrorCode::Unsupported, "dtype"});
  }
  for (const Expect& e : ex) {
    Status st = sm90::can_implement(e.p);
    const bool ok = st.code == e.code && st.message.find(e.needle) != std::string::npos;
    std::printf("%s can_implement: %s -> code %d \"%s\"\n", ok ? "PASS" : "FAIL", e.what,
                int(st.code), st.message.c_str());
    if (!ok) ++fails;
  }
  cudaFree(buf);
  return fails;
}

int run_checks(bool quick) {
  std::mt19937 rng(20261129);
  std::vector<Case> cases = {
      // B, Sq, Sk, Hq, Hkv, D, causal, left, right, layout  (D filled below)
      {1, 1, 1, 1, 1, 0, false, -1, -1, kBSHD},
      {1, 17, 17, 2, 1, 0, false, -1, -1, kBSHD},        // GQA 2
      {2, 113, 267, 4, 4, 0, false, -1, -1, kBSHD},      // Sq < Sk
      {1, 267, 113, 8, 1, 0, false, -1, -1, kBSHD},      // Sq > Sk, GQA 8
      {1, 267, 113, 2, 2, 0, true, -1, -1, kBSHD},       // causal, top rows see nothing
      {2, 113, 267, 4, 2, 0, true, -1, -1, kBSHD},       // causal, Sq < Sk
      {1, 1030, 1030, 2, 1, 0, true, -1, -1, kBSHD},     // causal, square, many tiles
      {1, 1030, 1030, 2, 2, 0, false, -1, -1, kBSHD},    // long non-causal
      {1, 17, 1030, 8, 8, 0, true, -1, -1, kBHSD},       // short queries, BHSD strides
      {1, 1030, 17, 2, 2, 0, false, -1, -1, kBHSD},      // short keys
      {1, 1030, 1, 1, 1, 0, true, -1, -1, kBSHD},        // one key, causal: all but the last row empty
      {1, 513, 700, 2, 1, 0, false, 100, 30, kBSHD},     // sliding window
      {1, 300, 300, 2, 2, 0, false, 64, -1, kBSHD},      // left window only
      {2, 267, 267, 2, 2, 0, true, -1, -1, kPackedQKV},  // packed QKV, BHSD out
      {2, 1, 1030, 8, 1, 0, false, -1, -1, kBSHD},       // decode-like, GQA 8
      {1, 300, 200, 2, 2, 0, true, 0, -1, kBSHD},        // diagonal only; top rows empty
      {1, 17, 0, 2, 1, 0, false, -1, -1, kBSHD},         // no keys at all
      {1, 130, 129, 2, 1, 0, true, -1, -1, kBSHD, true},  // lse = nullptr
      // More work tiles than SMs: persistent CTAs walk several tiles each
      // (Q reuse, K/V ring carried across tiles, pingpong across tiles).
      {3, 600, 600, 16, 4, 0, false, -1, -1, kBSHD},
      {2, 700, 300, 24, 8, 0, false, -1, -1, kBHSD},
  };
  if (quick) cases.resize(6);
  int fails = run_argument_checks(), total = 7;
  for (DType dt : {DType::BF16, DType::F16}) {
    for (int D : {64, 128, 256}) {
      for (Case c : cases) {
        c.D = D;
        ++total;
        if (!run_case(c, dt, rng)) ++fails;
        std::fflush(stdout);
      }
    }
  }
  std::printf("check: %d/%d passed\n", total - fails, total);
  return fails;
}

// ---- benchmark ----------------------------------------------------------------

__global__ void fill_normal(uint16_t* p, size_t n, uint32_t seed, int bf16) {
  for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < n;
       i += size_t(gridDim.x) * blockDim.x) {
    uint32_t h = uint32_t(i) * 2654435761u ^ seed ^ uint32_t(i >> 32) * 0x9E3779B9u;
    h ^= h >> 16, h *= 0x85EBCA6Bu, h ^= h >> 13, h *= 0xC2B2AE35u, h ^= h >> 16;
    uint32_t h2 = h * 0x27D4EB2Fu + 0x165667B1u;
    h2 ^= h2 >> 15, h2 *= 0x85EBCA6Bu, h2 ^= h2 >> 13;
    const float u1 = (float(h >> 8) + 1.f) * (1.f / 16777217.f);
    const float u2 = float(h2 >> 8) * (1.f / 16777216.f);
    const float z = sqrtf(-2.f * logf(u1)) * cospif(2.f * u2);
    if (bf16) {
      __nv_bfloat16 b = __float2bfloat16_rn(z);
      p[i] = *reinterpret_cast<uint16_t*>(&b);
    } else {
      __half b = __float2half_rn(z);
      p[i] = *reinterpret_cast<uint16_t*>(&b);
    }
  }
}

int run_bench(int reps, const char* csv_path, int only_hdim, int only_causal, const char* tag) {
  cudaDeviceProp prop;
  int dev = 0;
  CK(cudaGetDevice(&dev));
  CK(cudaGetDeviceProperties(&prop, dev));
  int drv = 0;
  CK(cudaDriverGetVersion(&drv));
  const int64_t tokens = 16384, hidden = 2048;
  const size_t n = size_t(tokens) * hidden;  // elements per tensor
  uint16_t *q, *k, *v, *o;
  float* lse;
  CK(cudaMalloc(&q, n * 2));
  CK(cudaMalloc(&k, n * 2));
  CK(cudaMalloc(&v, n * 2));
  CK(cudaMalloc(&o, n * 2));
  CK(cudaMalloc(&lse, size_t(tokens) * (hidden / 64) * 4));
  fill_normal<<<1024, 256>>>(q, n, 1u, 1);
  fill_normal<<<1024, 256>>>(k, n, 2u, 1);
  fill_normal<<<1024, 256>>>(v, n, 3u, 1);
  CK(cudaGetLastError());
  CK(cudaDeviceSynchronize());
  cudaEvent_t e0, e1;
  CK(cudaEventCreate(&e0));
  CK(cudaEventCreate(&e1));

  FILE* csv = csv_path ? std::fopen(csv_path, "w") : nullptr;
  char line[512];
  std::snprintf(line, sizeof line,
                "# device=%s sm=%d.%d driver=%d impl=flashattn-sm90-fwd reps=%d\n"
                "impl,dtype,hdim,causal,seqlen,batch,heads,median_ms,min_ms,tflops\n",
                prop.name, prop.major, prop.minor, drv, reps);
  std::fputs(line, stdout);
  if (csv) std::fputs(line, csv);
  for (int D : {64, 128, 256}) {
    if (only_hdim > 0 && D != only_hdim) continue;
    for (int causal : {0, 1}) {
      if (only_causal >= 0 && causal != only_causal) continue;
      for (int S = 512; S <= 16384; S *= 2) {
        const int B = int(tokens / S), H = int(hidden / D);
        FwdParams p;
        p.dtype = DType::BF16;
        p.device = flashattn::Device::CUDA;
        p.device_index = dev;
        p.batch = B, p.seqlen_q = S, p.seqlen_k = S, p.heads_q = H, p.heads_kv = H, p.head_dim = D;
        const Strides st{int64_t(S) * H * D, int64_t(H) * D, D};
        p.q = q, p.k = k, p.v = v, p.out = o, p.lse = lse;
        p.q_str = p.k_str = p.v_str = p.o_str = st;
        p.scale = 1.0f / std::sqrt(float(D));
        p.window_left = -1, p.window_right = causal ? 0 : -1, p.causal = causal;
        Status s = sm90::run_forward(p);
        if (!s.ok()) {
          std::printf("# D=%d S=%d: %s\n", D, S, s.message.c_str());
          continue;
        }
        for (int w = 0; w < 3; ++w) (void)sm90::run_forward(p);
        CK(cudaDeviceSynchronize());
        std::vector<float> ms(reps);
        for (int r = 0; r < reps; ++r) {
          CK(cudaEventRecord(e0));
          (void)sm90::run_forward(p);
          CK(cudaEventRecord(e1));
          CK(cudaEventSynchronize(e1));
          CK(cudaEventElapsedTime(&ms[r], e0, e1));
        }
        CK(cudaGetLastError());
        std::sort(ms.begin(), ms.end());
        const double med = ms[reps / 2];
        const double flops = 4.0 * B * H * double(S) * S * D / (causal ? 2.0 : 1.0);
        std::snprintf(line, sizeof line, "%s,bf16,%d,%d,%d,%d,%d,%.4f,%.4f,%.1f\n", tag, D,
                      causal, S, B, H, med, double(ms[0]), flops / (med * 1e-3) / 1e12);
        std::fputs(line, stdout);
        std::fflush(stdout);
        if (csv) std::fputs(line, csv);
      }
    }
  }
  if (csv) std::fclose(csv);
  cudaFree(q), cudaFree(k), cudaFree(v), cudaFree(o), cudaFree(lse);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  bool check = false, bench = false, quick = false;
  int reps = 30, only_hdim = 0, only_causal = -1;
  const char* csv = nullptr;
  const char* tag = "flashattn-sm90";
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if (a == "--check") check = true;
    else if (a == "--bench") bench = true;
    else if (a == "--quick") quick = true;
    else if (a == "--reps" && i + 1 < argc) reps = std::max(20, std::atoi(argv[++i]));
    else if (a == "--csv" && i + 1 < argc) csv = argv[++i];
    else if (a == "--hdim" && i + 1 < argc) only_hdim = std::atoi(argv[++i]);
    else if (a == "--causal" && i + 1 < argc) only_causal = std::atoi(argv[++i]);
    else if (a == "--tag" && i + 1 < argc) tag = argv[++i];
    else {
      std::fprintf(stderr,
                   "usage: %s [--check] [--bench] [--quick] [--reps N>=20] [--csv FILE]\n"
                   "          [--hdim 64|128|256] [--causal 0|1] [--tag NAME]\n",
                   argv[0]);
      return 2;
    }
  }
  if (!check && !bench) check = bench = true;
  int fails = 0;
  if (check) fails = run_checks(quick);
  if (bench) run_bench(reps, csv, only_hdim, only_causal, tag);
  return fails ? 1 : 0;
}
