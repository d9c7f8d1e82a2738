// CPU side of the sm80 checks, shared by sm80_selfcheck (GPU) and
// sm80_emu_check (CPU emulation): 16-bit conversions, random BSHD/BHSD
// tensors, attention in double and a naive version in the input dtype
// (rounding P, dP and dS as kernels do), and the DESIGN.md criterion
// max|out - ref| <= 2 * max|naive_dtype - ref| + atol.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <functional>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "common/params.hpp"

namespace fa = flashattn;
namespace fd = flashattn::detail;

// ---- 16-bit conversions on the host --------------------------------------------------
inline uint16_t to16(float x, fa::DType dt) {
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
inline float from16(uint16_t u, fa::DType dt) {
  if (dt == fa::DType::BF16) {
    __nv_bfloat16 h;
    std::memcpy(&h, &u, 2);
    return __bfloat162float(h);
  }
  __half h;
  std::memcpy(&h, &u, 2);
  return __half2float(h);
}
inline float round16(float x, fa::DType dt) { return from16(to16(x, dt), dt); }

inline void parallel_for(int n, const std::function<void(int)>& f) {
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

inline HostT make_random(int B, int S, int H, int D, bool bhsd, fa::DType dt, std::mt19937& rng) {
  HostT t{B, S, H, D, bhsd, {}};
  t.val.resize(t.numel());
  std::normal_distribution<float> nd(0.f, 1.f);
  for (auto& x : t.val) x = round16(nd(rng), dt);
  return t;
}

// ---- CPU attention: exact (double) and naive in the dtype ---------------------------
inline bool visible(const Case& c, int i, int j) {
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
inline Grads cpu_attention(const Case& c, const HostT& q, const HostT& k, const HostT& v, const HostT& dout,
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
inline Cmp compare(const HostT& got, const HostT& ref, const HostT& naive) {
  Cmp c;
  for (size_t i = 0; i < ref.val.size(); ++i) {
    if (!std::isfinite(got.val[i])) c.nan = true;
    c.err = std::max(c.err, double(std::fabs(got.val[i] - ref.val[i])));
    c.naive = std::max(c.naive, double(std::fabs(naive.val[i] - ref.val[i])));
    c.maxref = std::max(c.maxref, double(std::fabs(ref.val[i])));
  }
  return c;
}
inline bool report(const char* what, const Cmp& c) {
  const double atol = 1e-3 * c.maxref + 1e-5;
  const bool ok = !c.nan && c.err <= 2 * c.naive + atol;
  std::printf("    %-4s max|err| %.3e  naive %.3e  max|ref| %.3e  %s%s\n", what, c.err, c.naive, c.maxref,
              ok ? "ok" : "FAIL", c.nan ? " (NaN/inf)" : "");
  return ok;
}

inline fd::AttnParams base_params(const Case& c) {
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

// Physical 16-bit copy of a tensor (its strides) and back.
inline std::vector<uint16_t> to_phys(const HostT& t, fa::DType dt) {
  std::vector<uint16_t> buf(t.numel());
  for (int b = 0; b < t.B; ++b)
    for (int s = 0; s < t.S; ++s)
      for (int h = 0; h < t.H; ++h)
        for (int d = 0; d < t.D; ++d) buf[t.phys(b, s, h, d)] = to16(t.at(b, s, h, d), dt);
  return buf;
}
inline HostT from_phys(const std::vector<uint16_t>& buf, const HostT& like, fa::DType dt) {
  HostT t = like;
  for (int b = 0; b < t.B; ++b)
    for (int s = 0; s < t.S; ++s)
      for (int h = 0; h < t.H; ++h)
        for (int d = 0; d < t.D; ++d) t.at(b, s, h, d) = from16(buf[t.phys(b, s, h, d)], dt);
  return t;
}

// LSE against the double reference: -inf exactly where the row sees nothing.
inline bool report_lse(const std::vector<float>& lse, const std::vector<double>& ref) {
  double err = 0;
  bool bad = false;
  for (size_t i = 0; i < lse.size(); ++i) {
    if (std::isinf(ref[i])) {
      if (!(std::isinf(lse[i]) && lse[i] < 0)) bad = true;
    } else if (!std::isfinite(lse[i])) {
      bad = true;
    } else {
      err = std::max(err, std::fabs(lse[i] - ref[i]));
    }
  }
  const bool ok = !bad && err <= 1e-3;
  std::printf("    LSE  max|err| %.3e%s  %s\n", err, bad ? " (wrong -inf/NaN)" : "", ok ? "ok" : "FAIL");
  return ok;
}

inline void print_case(const Case& c) {
  std::printf("[%s] %s B=%d Sq=%d Sk=%d Hq=%d Hkv=%d D=%d%s window=(%d,%d) softcap=%g%s%s\n", c.name.c_str(),
              c.dt == fa::DType::BF16 ? "bf16" : "fp16", c.B, c.Sq, c.Sk, c.Hq, c.Hkv, c.D,
              c.causal ? " causal" : "", c.wl, c.wr, c.softcap, c.bhsd ? " BHSD" : "",
              c.det ? " deterministic" : "");
}
