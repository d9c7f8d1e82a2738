// CPU benchmark: flashattn against naive attention over OpenBLAS (two GEMMs
// and a softmax over an N x N buffer) and the machine's ceilings (FMA peak,
// streaming-read bandwidth), in one run. PyTorch's CPU SDPA is timed by
// torch_sdpa.py in the same run (bench/cpu/run.sh).
//
// Output: CSV rows on stdout
//   impl,pass,dtype,hdim,seqlen,causal,batch,heads,threads,median_ms,min_ms,max_ms,gflops
// and ceiling rows: ceiling,<name>,...,value
#include <cblas.h>
#include <omp.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "ceilings.hpp"
#include "flashattn/flashattn.hpp"

namespace {

using Clock = std::chrono::steady_clock;

struct Timing {
  double median, min, max;
};

Timing time_fn(const std::function<void()>& fn, int repeat, int warmup = 1) {
  for (int i = 0; i < warmup; ++i) fn();
  std::vector<double> t;
  for (int i = 0; i < repeat; ++i) {
    auto t0 = Clock::now();
    fn();
    t.push_back(std::chrono::duration<double>(Clock::now() - t0).count());
  }
  std::sort(t.begin(), t.end());
  size_t n = t.size();
  return {n % 2 ? t[n / 2] : 0.5 * (t[n / 2 - 1] + t[n / 2]), t.front(), t.back()};
}

// ---- naive attention over OpenBLAS -------------------------------------------

// One head at a time: S = scale Q K^T (sgemm), masked row softmax in place,
// O = P V (sgemm). S is the N x N buffer the fused method avoids.
struct Naive {
  int64_t B, S, H, D;
  bool causal;
  std::vector<float> P;  // [H, S, S], kept for the backward

  void forward(const float* q, const float* k, const float* v, float* o) {
    const float scale = 1.0f / std::sqrt(float(D));
    const int ld = int(H * D);
    P.resize(size_t(H * S * S));
    for (int64_t b = 0; b < B; ++b)
      for (int64_t h = 0; h < H; ++h) {
        float* p = P.data() + h * S * S;
        const int64_t off = (b * S * H + h) * D;
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, int(S), int(S), int(D), scale,
                    q + off, ld, k + off, ld, 0.f, p, int(S));
#pragma omp parallel for schedule(static)
        for (int64_t i = 0; i < S; ++i) {
          float* row = p + i * S;
          const int64_t n = causal ? i + 1 : S;
          float m = -INFINITY, l = 0;
          for (int64_t j = 0; j < n; ++j) m = std::max(m, row[j]);
          for (int64_t j = 0; j < n; ++j) l += (row[j] = std::exp(row[j] - m));
          for (int64_t j = 0; j < n; ++j) row[j] /= l;
          for (int64_t j = n; j < S; ++j) row[j] = 0;
        }
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, int(S), int(D), int(S), 1.f, p,
                    int(S), v + off, ld, 0.f, o + off, ld);
      }
  }

  // dV = P^T dO, dP = dO V^T, dS = P (dP - rowsum(dO o O)), dQ = s dS K, dK = s dS^T Q.
  void backward(const float* q, const float* k, const float* v, const float* o, const float* dout,
                float* dq, float* dk, float* dv) {
    const float scale = 1.0f / std::sqrt(float(D));
    const int ld = int(H * D);
    std::vector<float> dp(size_t(S * S));
    for (int64_t b = 0; b < B; ++b)
      for (int64_t h = 0; h < H; ++h) {
        float* p = P.data() + h * S * S;  // from the forward of the last batch: timing only
        const int64_t off = (b * S * H + h) * D;
        cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, int(S), int(D), int(S), 1.f, p,
                    int(S), dout + off, ld, 0.f, dv + off, ld);
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, int(S), int(S), int(D), 1.f,
                    dout + off, ld, v + off, ld, 0.f, dp.data(), int(S));
#pragma omp parallel for schedule(static)
        for (int64_t i = 0; i < S; ++i) {
          float di = 0;
          for (int64_t d = 0; d < D; ++d) di += dout[off + i * ld + d] * o[off + i * ld + d];
          for (int64_t j = 0; j < S; ++j) dp[size_t(i * S + j)] = p[i * S + j] * (dp[size_t(i * S + j)] - di);
        }
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, int(S), int(D), int(S), scale,
                    dp.data(), int(S), k + off, ld, 0.f, dq + off, ld);
        cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, int(S), int(D), int(S), scale,
                    dp.data(), int(S), q + off, ld, 0.f, dk + off, ld);
      }
  }
};

// ---- flashattn -----------------------------------------------------------------

uint16_t to_bf16(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  u += 0x7fff + ((u >> 16) & 1);
  return uint16_t(u >> 16);
}

void die(const flashattn::Status& s) {
  std::fprintf(stderr, "flashattn failed: %s\n", s.message.c_str());
  std::exit(1);
}

struct Config {
  std::vector<int64_t> hdims{64, 128, 256};
  std::vector<int64_t> seqlens{512, 1024, 2048, 4096, 8192};
  std::vector<std::string> dtypes{"fp32", "bf16"};
  std::vector<int> causals{0, 1};
  int64_t heads = 0;  // 0: 512 / hdim (hidden 512)
  int repeat = 3;
  bool naive = true, flash = true, ceilings = true, backward = true;
  int64_t decode_ctx = 0;
};

std::vector<int64_t> parse_list(const char* s) {
  std::vector<int64_t> r;
  for (const char* p = s; *p;) {
    r.push_back(std::strtoll(p, const_cast<char**>(&p), 10));
    if (*p == ',') ++p;
  }
  return r;
}

void row(const char* impl, const char* pass, const std::string& dt, int64_t d, int64_t s, int c,
         int64_t b, int64_t h, const Timing& t, double flops) {
  std::printf("%s,%s,%s,%lld,%lld,%d,%lld,%lld,%d,%.3f,%.3f,%.3f,%.1f\n", impl, pass, dt.c_str(),
              (long long)d, (long long)s, c, (long long)b, (long long)h, omp_get_max_threads(),
              t.median * 1e3, t.min * 1e3, t.max * 1e3, flops / t.median * 1e-9);
  std::fflush(stdout);
}

}  // namespace

int main(int argc, char** argv) {
  Config cfg;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    auto next = [&]() -> const char* {
      if (i + 1 >= argc) {
        std::fprintf(stderr, "%s needs a value\n", a.c_str());
        std::exit(2);
      }
      return argv[++i];
    };
    if (a == "--hdims") cfg.hdims = parse_list(next());
    else if (a == "--seqlens") cfg.seqlens = parse_list(next());
    else if (a == "--heads") cfg.heads = std::atoll(next());
    else if (a == "--repeat") cfg.repeat = std::atoi(next());
    else if (a == "--dtypes") {
      cfg.dtypes.clear();
      std::string s = next();
      for (size_t p = 0; p < s.size();) {
        size_t c = s.find(',', p);
        cfg.dtypes.push_back(s.substr(p, c - p));
        p = c == std::string::npos ? s.size() : c + 1;
      }
    } else if (a == "--causal") {
      cfg.causals.clear();
      for (auto v : parse_list(next())) cfg.causals.push_back(int(v));
    } else if (a == "--no-naive") cfg.naive = false;
    else if (a == "--no-ceilings") cfg.ceilings = false;
    else if (a == "--no-backward") cfg.backward = false;
    else {
      std::fprintf(stderr,
                   "usage: bench_cpu [--hdims 64,128,256] [--seqlens 512,...] [--heads N]\n"
                   "  [--dtypes fp32,bf16] [--causal 0,1] [--repeat N] [--no-naive]\n"
                   "  [--no-ceilings] [--no-backward]\n");
      return 2;
    }
  }
  openblas_set_num_threads(omp_get_max_threads());
  std::printf("impl,pass,dtype,hdim,seqlen,causal,batch,heads,threads,median_ms,min_ms,max_ms,gflops\n");
  if (cfg.ceilings) {
    const Ceilings c = pick_ceilings();
    std::fprintf(stderr, "ceilings (%s loops)...\n", c.isa);
    std::printf("# ceilings: %s loops\n", c.isa);
    std::printf("ceiling,fma_peak,fp32,0,0,0,0,0,%d,0,0,0,%.1f\n", omp_get_max_threads(), c.fma_peak_gflops());
    std::printf("ceiling,read_GBps,fp32,0,0,0,0,0,%d,0,0,0,%.1f\n", omp_get_max_threads(), c.read_bandwidth_gbs());
  }
  std::mt19937 rng(7);
  std::normal_distribution<float> nd;
  for (int64_t D : cfg.hdims)
    for (int64_t S : cfg.seqlens) {
      const int64_t B = 1, H = cfg.heads ? cfg.heads : std::max<int64_t>(1, 512 / D);
      const size_t n = size_t(B * S * H * D);
      std::vector<float> q(n), k(n), v(n), dout(n), o(n), dq(n), dk(n), dv(n);
      for (auto* t : {&q, &k, &v, &dout})
        for (float& x : *t) x = nd(rng);
      for (int c : cfg.causals) {
        const double fwd = 4.0 * B * H * double(S) * double(S) * D / (c ? 2 : 1);
        std::fprintf(stderr, "hdim %lld seqlen %lld causal %d\n", (long long)D, (long long)S, c);
        for (const std::string& dt : cfg.dtypes) {
          const flashattn::DType ft = dt == "bf16" ? flashattn::DType::BF16 : flashattn::DType::F32;
          const size_t es = flashattn::dtype_size(ft);
          std::vector<char> qb(n * es), kb(n * es), vb(n * es), ob(n * es), dob(n * es),
              dqb(n * es), dkb(n * es), dvb(n * es);
          std::vector<float> lse(size_t(B * H * S));
          auto fill = [&](const std::vector<float>& src, std::vector<char>& dst) {
            if (ft == flashattn::DType::F32) std::memcpy(dst.data(), src.data(), n * 4);
            else for (size_t i = 0; i < n; ++i) reinterpret_cast<uint16_t*>(dst.data())[i] = to_bf16(src[i]);
          };
          fill(q, qb);
          fill(k, kb);
          fill(v, vb);
          fill(dout, dob);
          using flashattn::TensorView;
          flashattn::ForwardArgs fa;
          fa.q = TensorView::contiguous(qb.data(), ft, {B, S, H, D});
          fa.k = TensorView::contiguous(kb.data(), ft, {B, S, H, D});
          fa.v = TensorView::contiguous(vb.data(), ft, {B, S, H, D});
          fa.out = TensorView::contiguous(ob.data(), ft, {B, S, H, D});
          fa.lse = TensorView::contiguous(lse.data(), flashattn::DType::F32, {B, H, S});
          fa.options.causal = c;
          Timing t = time_fn([&] { if (auto s = flashattn::forward(fa); !s.ok()) die(s); }, cfg.repeat);
          row("flashattn", "fwd", dt, D, S, c, B, H, t, fwd);
          if (cfg.backward) {
            flashattn::BackwardArgs ba;
            ba.q = fa.q;
            ba.k = fa.k;
            ba.v = fa.v;
            ba.out = fa.out;
            ba.lse = fa.lse;
            ba.dout = TensorView::contiguous(dob.data(), ft, {B, S, H, D});
            ba.dq = TensorView::contiguous(dqb.data(), ft, {B, S, H, D});
            ba.dk = TensorView::contiguous(dkb.data(), ft, {B, S, H, D});
            ba.dv = TensorView::contiguous(dvb.data(), ft, {B, S, H, D});
            ba.options.causal = c;
            t = time_fn([&] { if (auto s = flashattn::backward(ba); !s.ok()) die(s); }, cfg.repeat);
            row("flashattn", "bwd", dt, D, S, c, B, H, t, 2.5 * fwd);
          }
        }
        if (cfg.naive) {
          Naive nv{B, S, H, D, bool(c), {}};
          Timing t = time_fn([&] { nv.forward(q.data(), k.data(), v.data(), o.data()); }, cfg.repeat);
          row("naive_openblas", "fwd", "fp32", D, S, c, B, H, t, fwd);
          if (cfg.backward) {
            t = time_fn([&] { nv.backward(q.data(), k.data(), v.data(), o.data(), dout.data(), dq.data(), dk.data(), dv.data()); },
                        cfg.repeat);
            row("naive_openblas", "bwd", "fp32", D, S, c, B, H, t, 2.5 * fwd);
          }
          // OpenBLAS's worker threads spin for ~2^28 cycles (~0.1 s) after a
          // call; on 2 cores they took the next cell's first flashattn calls'
          // CPU (8 or 16 ms instead of 2: cpu-20261130-2228.csv and -2233.csv,
          // 512 causal). Let them go idle before the next cell.
          std::this_thread::sleep_for(std::chrono::milliseconds(300));
        }
      }
    }
  return 0;
}
