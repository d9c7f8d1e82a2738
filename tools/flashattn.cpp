// The `flashattn` command-line program: the project's main job.
//   flashattn run     time forward (and backward) on one shape, optionally check it
//   flashattn memory  the fused method's extra memory against the naive N x N method
//   flashattn info    version, backends, CPU features
#include <omp.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <stdexcept>
#include <string>
#include <vector>

#include "buffers.hpp"
#include "check.hpp"
#include "common/params.hpp"
#include "flashattn/flashattn.hpp"

namespace {

// SplitMix64 (Steele, Lea, Flood 2014): a 64-bit mixing function, used as a
// counter-based generator for the CLI's inputs.
inline uint64_t splitmix64(uint64_t x) {
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

using flashattn::Device;
using flashattn::DType;

const char* kUsage = R"(usage: flashattn <command> [options]

commands:
  run      time attention on one shape (default: batch 1, 16 heads, 4096 tokens,
           head dim 128, bf16, on the GPU when one is present, else the CPU)
  memory   extra memory of the fused run against the naive N x N method, over N
  info     version, backends and CPU features

run options:
  --batch N         (1)          --heads N      query heads (16)
  --heads-kv N      (= heads)    --head-dim N   (128)
  --head-dim-v N    v's head dim (= head-dim; e.g. 128 with --head-dim 192)
  --seqlen-q N      (4096)       --seqlen-k N   (= seqlen-q)
  --dtype fp32|fp16|bf16|e4m3 (bf16)  --causal  bottom-right aligned causal mask
                    (e4m3: fp8 forward, inputs quantised per tensor with
                    descale = amax / 448, bf16 out; forward only)
  --window-left N / --window-right N  sliding window (-1 = unbounded)
  --softcap X       (0 = off)    --scale X      (0 = 1/sqrt(head dim))
  --backward        also time the backward pass
  --deterministic   deterministic backward
  --device cpu|cuda|auto (auto)  --threads N    CPU threads (all cores)
  --repeat N        timed repetitions (5 on CPU, 20 on CUDA); --warmup N (1)
  --check           compare with the fp64 reference on sampled heads
  --check-heads N   how many (batch, kv head) groups --check samples (1)
  --seed N          (1)

memory options:
  --heads N (16) --head-dim N (128) --dtype (bf16) --seqlens N,N,... (1024..32768)
)";

struct Args {
  std::string command;
  std::map<std::string, std::string> kv;
  bool flag(const std::string& k) const { return kv.count(k) > 0; }
  std::string str(const std::string& k, const std::string& def) const {
    auto it = kv.find(k);
    return it == kv.end() ? def : it->second;
  }
  long long num(const std::string& k, long long def) const {
    auto it = kv.find(k);
    if (it == kv.end()) return def;
    char* end = nullptr;
    long long v = std::strtoll(it->second.c_str(), &end, 10);
    if (end == it->second.c_str() || *end) throw std::runtime_error("--" + k + ": expected an integer, got '" + it->second + "'");
    return v;
  }
  double real(const std::string& k, double def) const {
    auto it = kv.find(k);
    if (it == kv.end()) return def;
    char* end = nullptr;
    double v = std::strtod(it->second.c_str(), &end);
    if (end == it->second.c_str() || *end) throw std::runtime_error("--" + k + ": expected a number, got '" + it->second + "'");
    return v;
  }
};

const char* kFlags[] = {"causal", "backward", "check", "deterministic", "help"};

Args parse(int argc, char** argv) {
  Args a;
  int i = 1;
  if (i < argc && argv[i][0] != '-') a.command = argv[i++];
  for (; i < argc; ++i) {
    std::string s = argv[i];
    if (s == "-h") s = "--help";
    if (s.rfind("--", 0) != 0) throw std::runtime_error("unexpected argument '" + s + "'");
    std::string key = s.substr(2);
    auto eq = key.find('=');
    if (eq != std::string::npos) {
      a.kv[key.substr(0, eq)] = key.substr(eq + 1);
      continue;
    }
    bool is_flag = std::find(std::begin(kFlags), std::end(kFlags), key) != std::end(kFlags);
    if (is_flag) {
      a.kv[key] = "1";
    } else {
      if (i + 1 >= argc) throw std::runtime_error("--" + key + " needs a value");
      a.kv[key] = argv[++i];
    }
  }
  return a;
}

void require_known(const Args& a, std::initializer_list<const char*> known) {
  for (auto& [k, v] : a.kv) {
    bool ok = k == "help";
    for (const char* n : known) ok = ok || k == n;
    if (!ok) throw std::runtime_error("unknown option --" + k + " for '" + a.command + "' (see --help)");
  }
}

DType parse_dtype(const std::string& s) {
  if (s == "fp32" || s == "float32") return DType::F32;
  if (s == "fp16" || s == "float16") return DType::F16;
  if (s == "bf16" || s == "bfloat16") return DType::BF16;
  if (s == "e4m3" || s == "fp8" || s == "float8_e4m3") return DType::F8E4M3;
  throw std::runtime_error("--dtype: expected fp32, fp16, bf16 or e4m3, got '" + s + "'");
}

std::string human_bytes(double b) {
  const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  int u = 0;
  while (b >= 1024 && u < 4) {
    b /= 1024;
    ++u;
  }
  char buf[32];
  std::snprintf(buf, sizeof buf, u ? "%.1f %s" : "%.0f %s", b, units[u]);
  return buf;
}

// The naive method materialises S and P: two fp32 N x N matrices per head.
double naive_extra_bytes(int64_t B, int64_t H, int64_t Sq, int64_t Sk) {
  return 2.0 * 4.0 * double(B) * double(H) * double(Sq) * double(Sk);
}

struct Stats {
  double median, min, max;
};

Stats stats(std::vector<double> t) {
  std::sort(t.begin(), t.end());
  size_t n = t.size();
  double med = n % 2 ? t[n / 2] : 0.5 * (t[n / 2 - 1] + t[n / 2]);
  return {med, t.front(), t.back()};
}

void fail(const flashattn::Status& s, const char* what) {
  throw std::runtime_error(std::string(what) + " failed: " + s.message);
}

int cmd_run(const Args& a) {
  require_known(a, {"batch", "heads", "heads-kv", "seqlen-q", "seqlen-k", "head-dim", "head-dim-v", "dtype",
                    "causal", "window-left", "window-right", "softcap", "scale", "backward",
                    "deterministic", "device", "threads", "repeat", "warmup", "check",
                    "check-heads", "seed"});
  const int64_t B = a.num("batch", 1), Hq = a.num("heads", 16), Hkv = a.num("heads-kv", Hq);
  const int64_t Sq = a.num("seqlen-q", 4096), Sk = a.num("seqlen-k", Sq), D = a.num("head-dim", 128);
  const int64_t Dv = a.num("head-dim-v", D);
  const DType dt = parse_dtype(a.str("dtype", "bf16"));
  const std::string dev_s = a.str("device", "auto");
  Device dev;
  if (dev_s == "cpu") dev = Device::CPU;
  else if (dev_s == "cuda") dev = Device::CUDA;
  else if (dev_s == "auto") dev = flashattn::cuda_available() ? Device::CUDA : Device::CPU;
  else throw std::runtime_error("--device: expected cpu, cuda or auto, got '" + dev_s + "'");
  if (dev == Device::CUDA && !flashattn::cuda_available())
    throw std::runtime_error("--device cuda: no CUDA device is available to this build");
  if (a.flag("threads")) omp_set_num_threads(int(a.num("threads", 1)));
  const bool bwd = a.flag("backward");
  const bool fp8 = dt == DType::F8E4M3;
  if (fp8 && bwd) throw std::runtime_error("--backward: the fp8 (e4m3) attention is forward only");
  const int repeat = int(a.num("repeat", dev == Device::CPU ? 5 : 20));
  const int warmup = int(a.num("warmup", 1));
  if (repeat < 1 || warmup < 0) throw std::runtime_error("--repeat must be >= 1 and --warmup >= 0");

  flashattn::Options opt;
  opt.causal = a.flag("causal");
  opt.window_left = a.num("window-left", -1);
  opt.window_right = a.num("window-right", -1);
  opt.softcap = float(a.real("softcap", 0.0));
  opt.softmax_scale = float(a.real("scale", 0.0));
  opt.deterministic = a.flag("deterministic");

  fa_cli::HostProblem hp{B, Sq, Sk, Hq, Hkv, D, Dv, dt, opt, {}, {}, {}, {}, {}, {}, {}, {}, {}};
  const size_t es = flashattn::dtype_size(dt);
  const DType out_dt = flashattn::detail::out_dtype_for(dt);  // fp8 attention writes bf16
  const size_t oes = flashattn::dtype_size(out_dt);
  const size_t nq = size_t(B * Sq * Hq * D), nk = size_t(B * Sk * Hkv * D), nl = size_t(B * Hq * Sq);
  const size_t no = size_t(B * Sq * Hq * Dv), nv = size_t(B * Sk * Hkv * Dv);  // out / dout, v / dv
  if (B < 0 || Hq < 0 || Hkv < 0 || Sq < 0 || Sk < 0 || D < 0 || Dv < 0)
    throw std::runtime_error("sizes must be >= 0");

  // Fresh random normal inputs, generated in parallel (on a device machine the
  // single-threaded generator took most of a short run's seconds): element i of
  // tensor `id` comes from a counter-based generator keyed by (seed, id, chunk
  // of i), so the values do not depend on the thread count.
  const uint64_t seed = uint64_t(a.num("seed", 1));
  // fp8: each tensor quantised as a user would, descale = amax / 448 (the
  // stored values span e4m3's range; the attention sees stored * descale).
  auto random_tensor = [&](size_t n, uint64_t id, float* descale) {
    std::vector<float> f(n);
    constexpr size_t kChunk = 4096;
    const int64_t chunks = int64_t((n + kChunk - 1) / kChunk);
    float amax = 0.f;
#pragma omp parallel for schedule(static) reduction(max : amax)
    for (int64_t c = 0; c < chunks; ++c) {
      uint64_t state = splitmix64(seed ^ splitmix64((id << 40) ^ uint64_t(c)));
      const size_t end = std::min(n, size_t(c + 1) * kChunk);
      for (size_t i = size_t(c) * kChunk; i < end; i += 2) {
        // Box-Muller on two 24-bit uniforms, u1 in (0, 1].
        const float u1 = float((splitmix64(state += 0x9e3779b97f4a7c15ull) >> 40) + 1) * 0x1p-24f;
        const float u2 = float(splitmix64(state += 0x9e3779b97f4a7c15ull) >> 40) * 0x1p-24f;
        const float r = std::sqrt(-2.f * std::log(u1)), t = 6.2831853f * u2;
        f[i] = r * std::cos(t);
        if (i + 1 < end) f[i + 1] = r * std::sin(t);
        amax = std::max({amax, std::fabs(f[i]), i + 1 < end ? std::fabs(f[i + 1]) : 0.f});
      }
    }
    if (descale != nullptr) *descale = amax > 0.f ? amax / 448.f : 1.f;
    std::vector<char> t(n * es);
#pragma omp parallel for schedule(static)
    for (int64_t c = 0; c < chunks; ++c) {
      const size_t i0 = size_t(c) * kChunk, len = std::min(n, i0 + kChunk) - i0;
      if (descale != nullptr)
        for (size_t i = i0; i < i0 + len; ++i) f[i] /= *descale;
      fa_cli::from_float(f.data() + i0, t.data() + i0 * es, dt, len);
    }
    return t;
  };
  std::fprintf(stderr, "generating inputs...\n");
  hp.q = random_tensor(nq, 0, fp8 ? &hp.q_descale : nullptr);
  hp.k = random_tensor(nk, 1, fp8 ? &hp.k_descale : nullptr);
  hp.v = random_tensor(nv, 2, fp8 ? &hp.v_descale : nullptr);
  if (bwd) hp.dout = random_tensor(no, 3, nullptr);

  fa_cli::Buffer q(dev, nq * es), k(dev, nk * es), v(dev, nv * es), out(dev, no * oes),
      lse(dev, nl * 4), descales(dev, 3 * sizeof(float));
  q.upload(hp.q.data());
  k.upload(hp.k.data());
  v.upload(hp.v.data());
  const float host_descales[3] = {hp.q_descale, hp.k_descale, hp.v_descale};
  descales.upload(host_descales);

  flashattn::ForwardArgs fa;
  fa.q = flashattn::TensorView::contiguous(q.data(), dt, {B, Sq, Hq, D}, dev);
  fa.k = flashattn::TensorView::contiguous(k.data(), dt, {B, Sk, Hkv, D}, dev);
  fa.v = flashattn::TensorView::contiguous(v.data(), dt, {B, Sk, Hkv, Dv}, dev);
  fa.out = flashattn::TensorView::contiguous(out.data(), out_dt, {B, Sq, Hq, Dv}, dev);
  fa.lse = flashattn::TensorView::contiguous(lse.data(), DType::F32, {B, Hq, Sq}, dev);
  fa.options = opt;
  if (fp8) {
    float* d = static_cast<float*>(descales.data());
    fa.fp8_descale.q = flashattn::TensorView::contiguous(d, DType::F32, {1}, dev);
    fa.fp8_descale.k = flashattn::TensorView::contiguous(d + 1, DType::F32, {1}, dev);
    fa.fp8_descale.v = flashattn::TensorView::contiguous(d + 2, DType::F32, {1}, dev);
  }
  size_t fwd_ws = 0;
  if (auto s = flashattn::forward_workspace_bytes(fa, &fwd_ws); !s.ok()) fail(s, "forward");

  // FLOPs: forward 4*B*H*Sq*Sk*D over the visible pairs (halved for causal
  // square shapes), backward 2.5x the forward, as DESIGN.md counts them.
  double pairs = double(Sq) * double(Sk);
  if (opt.causal || opt.window_left >= 0 || opt.window_right >= 0) {
    double visible = 0;
    const int64_t off = Sk - Sq;
    const int64_t right = opt.causal ? 0 : opt.window_right;
    for (int64_t i = 0; i < Sq; ++i) {
      int64_t lo = opt.window_left < 0 ? 0 : std::max<int64_t>(0, i + off - opt.window_left);
      int64_t hi = right < 0 ? Sk : std::min<int64_t>(Sk, i + off + right + 1);
      visible += double(std::max<int64_t>(0, hi - lo));
    }
    pairs = visible;
  }
  // With v's own head dim: 2 * pairs * (D + Dv), the two products' FLOPs.
  const double fwd_flops = 2.0 * double(B) * double(Hq) * pairs * double(D + Dv);

  std::printf("flashattn %s  device %s  threads %d\n", flashattn::version(),
              fa_cli::device_name(dev).c_str(), dev == Device::CPU ? omp_get_max_threads() : 0);
  const std::string dims = Dv == D ? std::to_string(D) : std::to_string(D) + " (v " + std::to_string(Dv) + ")";
  std::printf("shape  batch %lld  heads %lld/%lld (q/kv)  seqlen %lld/%lld (q/k)  head_dim %s  %s%s%s\n",
              (long long)B, (long long)Hq, (long long)Hkv, (long long)Sq, (long long)Sk,
              dims.c_str(), flashattn::dtype_name(dt), fp8 ? " (bfloat16 out)" : "",
              opt.causal ? "  causal" : "");

  auto time_it = [&](const char* what, auto&& call, double flops) {
    std::vector<double> times;
    for (int r = 0; r < warmup + repeat; ++r) {
      fa_cli::device_synchronize(dev);
      auto t0 = std::chrono::steady_clock::now();
      call();
      fa_cli::device_synchronize(dev);
      double sec = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      bool warm = r < warmup;
      if (!warm) times.push_back(sec);
      if (sec > 0.5 || r + 1 == warmup + repeat)
        std::fprintf(stderr, "  %s %s %d/%d: %.3f s\n", what, warm ? "warm-up" : "repeat",
                     warm ? r + 1 : r + 1 - warmup, warm ? warmup : repeat, sec);
    }
    Stats st = stats(times);
    std::printf("%-8s median %9.3f ms  (min %.3f, max %.3f, %d runs)  %8.1f GFLOP/s\n", what,
                st.median * 1e3, st.min * 1e3, st.max * 1e3, repeat, flops / st.median * 1e-9);
  };

  time_it("forward", [&] { if (auto s = flashattn::forward(fa); !s.ok()) fail(s, "forward"); }, fwd_flops);
  hp.out.resize(no * oes);
  out.download(hp.out.data());
  hp.lse.resize(nl);
  lse.download(hp.lse.data());

  size_t bwd_ws = 0;
  if (bwd) {
    fa_cli::Buffer dout(dev, no * es), dq(dev, nq * es), dk(dev, nk * es), dv(dev, nv * es);
    dout.upload(hp.dout.data());
    flashattn::BackwardArgs ba;
    ba.q = fa.q;
    ba.k = fa.k;
    ba.v = fa.v;
    ba.out = fa.out;
    ba.lse = fa.lse;
    ba.dout = flashattn::TensorView::contiguous(dout.data(), dt, {B, Sq, Hq, Dv}, dev);
    ba.dq = flashattn::TensorView::contiguous(dq.data(), dt, {B, Sq, Hq, D}, dev);
    ba.dk = flashattn::TensorView::contiguous(dk.data(), dt, {B, Sk, Hkv, D}, dev);
    ba.dv = flashattn::TensorView::contiguous(dv.data(), dt, {B, Sk, Hkv, Dv}, dev);
    ba.options = opt;
    if (auto s = flashattn::backward_workspace_bytes(ba, &bwd_ws); !s.ok()) fail(s, "backward");
    time_it("backward", [&] { if (auto s = flashattn::backward(ba); !s.ok()) fail(s, "backward"); },
            2.5 * fwd_flops);
    hp.dq.resize(nq * es);
    hp.dk.resize(nk * es);
    hp.dv.resize(nv * es);
    dq.download(hp.dq.data());
    dk.download(hp.dk.data());
    dv.download(hp.dv.data());
  }

  const double naive = naive_extra_bytes(B, Hq, Sq, Sk);
  std::printf("memory  extra (workspace) forward %s%s%s;  naive N x N method (S and P, fp32) %s\n",
              human_bytes(double(fwd_ws)).c_str(), bwd ? ", backward " : "",
              bwd ? human_bytes(double(bwd_ws)).c_str() : "", human_bytes(naive).c_str());

  if (a.flag("check")) {
    const int groups = int(a.num("check-heads", 1));
    std::fprintf(stderr, "checking %d head group(s) against the fp64 reference...\n", groups);
    auto t0 = std::chrono::steady_clock::now();
    auto lines = fa_cli::check_against_reference(hp, bwd, groups);
    bool all = true;
    for (auto& l : lines) {
      std::printf("check  %-22s max|err| %.3e  naive %.3e  tolerance %.3e  %s\n", l.what.c_str(),
                  l.max_err, l.naive_err, l.tolerance, l.pass ? "PASS" : "FAIL");
      all = all && l.pass;
    }
    std::printf("check  %s (%.1f s; rule: src/reference/rule.hpp)\n",
                all ? "PASS" : "FAIL",
                std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
    if (!all) return 1;
  }
  return 0;
}

int cmd_memory(const Args& a) {
  require_known(a, {"heads", "head-dim", "dtype", "seqlens", "causal"});
  const int64_t H = a.num("heads", 16), D = a.num("head-dim", 128);
  const DType dt = parse_dtype(a.str("dtype", "bf16"));
  if (dt == DType::F8E4M3) {
    throw std::runtime_error("memory: --dtype e4m3 is forward only; the report covers forward and "
                             "backward (use fp32, fp16 or bf16)");
  }
  std::vector<int64_t> ns;
  std::string list = a.str("seqlens", "1024,2048,4096,8192,16384,32768");
  for (size_t p = 0; p < list.size();) {
    size_t c = list.find(',', p);
    ns.push_back(std::stoll(list.substr(p, c - p)));
    p = c == std::string::npos ? list.size() : c + 1;
  }
  std::printf("extra memory beside inputs and outputs, batch 1, %lld heads, head_dim %lld, %s, CPU\n",
              (long long)H, (long long)D, flashattn::dtype_name(dt));
  std::printf("%8s  %14s  %14s  %16s  %10s\n", "seqlen", "fused fwd", "fused bwd", "naive (S,P fp32)",
              "naive/fused");
  double prev_f = 0, prev_n = 0;
  for (int64_t N : ns) {
    // Shapes only: the workspace query reads no data, so the views point at
    // disjoint address ranges that are never touched (the checks want
    // non-null, non-overlapping outputs).
    const size_t step = size_t(N * H * D * 4 + 4096);
    int slot = 0;
    auto view = [&](std::initializer_list<int64_t> s, DType t) {
      void* fake = reinterpret_cast<void*>((uintptr_t(1) << 40) + (slot++) * step);
      return flashattn::TensorView::contiguous(fake, t, s);
    };
    flashattn::ForwardArgs fa;
    fa.q = view({1, N, H, D}, dt);
    fa.k = view({1, N, H, D}, dt);
    fa.v = view({1, N, H, D}, dt);
    fa.out = view({1, N, H, D}, dt);
    fa.options.causal = a.flag("causal");
    flashattn::BackwardArgs ba;
    ba.q = fa.q;
    ba.k = fa.k;
    ba.v = fa.v;
    ba.out = fa.out;
    ba.dout = view({1, N, H, D}, dt);
    ba.lse = view({1, H, N}, DType::F32);
    ba.dq = view({1, N, H, D}, dt);
    ba.dk = view({1, N, H, D}, dt);
    ba.dv = view({1, N, H, D}, dt);
    ba.options = fa.options;
    size_t fw = 0, bw = 0;
    if (auto s = flashattn::forward_workspace_bytes(fa, &fw); !s.ok()) fail(s, "forward workspace");
    if (auto s = flashattn::backward_workspace_bytes(ba, &bw); !s.ok()) fail(s, "backward workspace");
    const double naive = naive_extra_bytes(1, H, N, N);
    std::printf("%8lld  %14s  %14s  %16s  %10.0fx", (long long)N, human_bytes(double(fw)).c_str(),
                human_bytes(double(bw)).c_str(), human_bytes(naive).c_str(), naive / double(std::max<size_t>(fw, 1)));
    if (prev_f > 0) std::printf("   growth vs previous: fused %.2fx, naive %.2fx", double(bw) / prev_f, naive / prev_n);
    std::printf("\n");
    prev_f = double(bw);
    prev_n = naive;
  }
  return 0;
}

int cmd_info(const Args&) {
  std::printf("flashattn %s\n", flashattn::version());
  std::printf("backends: cpu%s\n", flashattn::cuda_available() ? ", cuda" : " (cuda: not available)");
  std::printf("cpu: %d OpenMP threads; avx2 %s, avx512f %s, avx512_bf16 %s\n", omp_get_max_threads(),
              __builtin_cpu_supports("avx2") ? "yes" : "no",
              __builtin_cpu_supports("avx512f") ? "yes" : "no",
              __builtin_cpu_supports("avx512bf16") ? "yes" : "no");
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  try {
    Args a = parse(argc, argv);
    if (a.command.empty() || a.flag("help") || a.command == "help") {
      std::fputs(kUsage, a.command.empty() && !a.flag("help") ? stderr : stdout);
      return a.command.empty() && !a.flag("help") ? 2 : 0;
    }
    if (a.command == "run") return cmd_run(a);
    if (a.command == "memory") return cmd_memory(a);
    if (a.command == "info") return cmd_info(a);
    throw std::runtime_error("unknown command '" + a.command + "' (run, memory, info)");
  } catch (const std::exception& e) {
    std::fprintf(stderr, "flashattn: %s\n", e.what());
    return 2;
  }
}
