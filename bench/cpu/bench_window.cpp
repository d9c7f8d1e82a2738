// Sliding-window cost on the CPU backend: forward time at one long sequence
// against the window size. The forward skips whole key tiles outside a
// query tile's window, so the time should grow ~ linearly with the window
// (2 * window + 1 keys per query with a symmetric window), not with N^2.
//
//   bench_window [--seqlen 8192] [--hdim 128] [--heads 1] [--repeat 5]
//                [--windows 128,256,...] [--backward]
// CSV on stdout: pass,seqlen,hdim,heads,window,keys_per_query,
//   tile_keys_per_query,threads,median_ms,min_ms,max_ms,ms_per_1k_tile_keys
// keys_per_query: keys a query row sees (mean); tile_keys_per_query: keys in
// the key tiles the forward visits for the row's query tile (mean), i.e. the
// work done, from the forward's tile sizes (256 query rows x 64 keys,
// src/cpu/kernels/tiles.hpp): about 2 * window + 256 + 64.
// window = -1 is full attention. Each configuration is timed `repeat` times
// after one warm-up; the spread (min..max) is reported because the machine
// is shared.
#include <omp.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "flashattn/flashattn.hpp"

namespace {

std::vector<int64_t> parse_list(const char* s) {
  std::vector<int64_t> r;
  std::string x(s);
  size_t pos = 0;
  while (pos < x.size()) {
    size_t e = x.find(',', pos);
    if (e == std::string::npos) e = x.size();
    r.push_back(std::atoll(x.substr(pos, e - pos).c_str()));
    pos = e + 1;
  }
  return r;
}

}  // namespace

int main(int argc, char** argv) {
  int64_t S = 8192, D = 128, H = 1;
  int repeat = 5;
  bool backward = false;
  std::vector<int64_t> windows{128, 256, 512, 1024, 2048, 4096, 8192, -1};
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    auto next = [&]() -> const char* {
      if (i + 1 >= argc) { std::fprintf(stderr, "%s needs a value\n", a.c_str()); std::exit(2); }
      return argv[++i];
    };
    if (a == "--seqlen") S = std::atoll(next());
    else if (a == "--hdim") D = std::atoll(next());
    else if (a == "--heads") H = std::atoll(next());
    else if (a == "--repeat") repeat = std::atoi(next());
    else if (a == "--windows") windows = parse_list(next());
    else if (a == "--backward") backward = true;
    else {
      std::fprintf(stderr, "usage: bench_window [--seqlen N] [--hdim D] [--heads H] [--repeat R] "
                           "[--windows 128,...,-1] [--backward]\n");
      return 2;
    }
  }
  using flashattn::DType;
  using flashattn::TensorView;
  const size_t n = size_t(S * H * D);
  std::vector<float> q(n), k(n), v(n), o(n), dout(n), dq(n), dk(n), dv(n), lse(size_t(H * S));
  std::mt19937 g(1);
  std::normal_distribution<float> nd;
  for (auto* x : {&q, &k, &v, &dout})
    for (float& e : *x) e = nd(g);
  auto view = [&](std::vector<float>& x) { return TensorView::contiguous(x.data(), DType::F32, {1, S, H, D}); };

  std::printf("pass,seqlen,hdim,heads,window,keys_per_query,tile_keys_per_query,threads,median_ms,min_ms,"
              "max_ms,ms_per_1k_tile_keys\n");
  constexpr int64_t kTileQ = 256, kTileK = 64;  // FBR, FBC of the CPU forward
  for (int64_t w : windows) {
    flashattn::Options opt;
    opt.window_left = w;
    opt.window_right = w;
    flashattn::ForwardArgs fa;
    fa.q = view(q);
    fa.k = view(k);
    fa.v = view(v);
    fa.out = view(o);
    fa.lse = TensorView::contiguous(lse.data(), DType::F32, {1, H, S});
    fa.options = opt;
    flashattn::BackwardArgs ba;
    ba.q = fa.q;
    ba.k = fa.k;
    ba.v = fa.v;
    ba.out = fa.out;
    ba.lse = fa.lse;
    ba.dout = view(dout);
    ba.dq = view(dq);
    ba.dk = view(dk);
    ba.dv = view(dv);
    ba.options = opt;
    // Average keys per query (rows near the ends see fewer).
    double keys = 0;
    for (int64_t i = 0; i < S; ++i) {
      const int64_t lo = w < 0 ? 0 : std::max<int64_t>(0, i - w);
      const int64_t hi = w < 0 ? S : std::min<int64_t>(S, i + w + 1);
      keys += double(hi - lo);
    }
    keys /= double(S);
    double tile_keys = 0;
    for (int64_t r0 = 0; r0 < S; r0 += kTileQ) {
      const int64_t r1 = std::min(S, r0 + kTileQ);
      const int64_t lo = w < 0 ? 0 : std::max<int64_t>(0, r0 - w) / kTileK * kTileK;
      const int64_t hi = w < 0 ? S : std::min<int64_t>(S, r1 - 1 + w + 1);
      tile_keys += double(hi - lo) * double(r1 - r0);
    }
    tile_keys /= double(S);
    for (int pass = 0; pass < (backward ? 2 : 1); ++pass) {
      auto run = [&] {
        const flashattn::Status st = pass == 0 ? flashattn::forward(fa) : flashattn::backward(ba);
        if (!st.ok()) { std::fprintf(stderr, "%s\n", st.message.c_str()); std::exit(1); }
      };
      run();  // warm-up (and the forward's LSE for the backward)
      std::vector<double> t;
      for (int r = 0; r < repeat; ++r) {
        const auto t0 = std::chrono::steady_clock::now();
        run();
        t.push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count());
      }
      std::sort(t.begin(), t.end());
      const double med = t.size() % 2 ? t[t.size() / 2] : 0.5 * (t[t.size() / 2 - 1] + t[t.size() / 2]);
      std::printf("%s,%lld,%lld,%lld,%lld,%.1f,%.1f,%d,%.2f,%.2f,%.2f,%.3f\n", pass ? "bwd" : "fwd",
                  (long long)S, (long long)D, (long long)H, (long long)w, keys, tile_keys,
                  omp_get_max_threads(), med, t.front(), t.back(), med / (tile_keys / 1000.0));
      std::fflush(stdout);
    }
  }
  return 0;
}
