// CPU backend: picks the kernel table for this CPU (once per call), sizes and
// allocates the scratch (exactly what workspace_bytes reports), runs.
#include "cpu_backend.hpp"

#include <omp.h>
#if defined(__x86_64__) || defined(_M_X64)
#include <cpuid.h>
#endif

#include <cstdlib>
#include <cstring>
#include <memory>
#include <new>
#include <string>

#include "amx_support.hpp"
#include "common/head_dim_pad.hpp"
#include "common/host_convert.hpp"
#include "common/rotary.hpp"
#include "fp8_forward.hpp"
#include "kernel_table.hpp"

namespace flashattn::detail::cpu {
namespace {

enum class Isa { Scalar = 0, Avx2 = 1, Avx512 = 2, Avx512Bf16 = 3, Amx = 4 };

// What the CPU offers, read once: CPUID is a VM exit under a hypervisor, and
// reading it on every call (select() runs once or twice per forward) took
// half of a 64-key decode call's 64 us on this project's 2-core VM
// (bench/NOTES.md). FLASHATTN_CPU_ISA is still read per call (tests switch it).
struct CpuFeatures {
  bool avx2 = false, avx512 = false, amx = false, avx512_bf16 = false;
  bool amd = false;  // CPUID vendor "AuthenticAMD"
  int family = 0;    // CPUID leaf 1: base family, plus the extended family when it is 0xf
};

const CpuFeatures& cpu_features() {
  static const CpuFeatures f = [] {
    CpuFeatures c;
#if defined(__x86_64__) || defined(_M_X64)
    __builtin_cpu_init();
    // F16C from CPUID leaf 1 (ECX bit 29): clang 14's __builtin_cpu_supports
    // does not know "f16c" (the sanitizer/fuzzer build uses clang).
    unsigned a = 0, b = 0, cx = 0, d = 0;
    const bool f16c = __get_cpuid(1, &a, &b, &cx, &d) && (cx & (1u << 29));
    c.avx2 = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") && f16c;
    c.avx512 = c.avx2 && __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
               __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512dq");
    // Leaf 0: the vendor string in EBX, EDX, ECX.
    if (__get_cpuid(0, &a, &b, &cx, &d)) c.amd = b == 0x68747541u && d == 0x69746e65u && cx == 0x444d4163u;
    if (__get_cpuid(1, &a, &b, &cx, &d)) {
      c.family = int((a >> 8) & 0xf);
      if (c.family == 0xf) c.family += int((a >> 20) & 0xff);
    }
#if defined(FLASHATTN_CPU_AMX)
    c.amx = c.avx512 && amx_usable();
    c.avx512_bf16 = c.avx512 && avx512_bf16_usable();
#endif
#endif
    return c;
  }();
  return f;
}

bool supported(Isa isa) {
  const CpuFeatures& f = cpu_features();
  switch (isa) {
    case Isa::Amx: return f.amx;
    case Isa::Avx512Bf16: return f.avx512_bf16;
    case Isa::Avx512: return f.avx512;
    case Isa::Avx2: return f.avx2;
    case Isa::Scalar: return true;
    default: return false;
  }
}

}  // namespace

bool decode_prefetch_rule(const char* env, bool amd, int family, bool avx512) noexcept {
  if (env != nullptr && !std::strcmp(env, "l2")) return true;
  if (env != nullptr && !std::strcmp(env, "l1")) return false;
  // AMD family 0x19 with AVX-512 is Zen 4 (Zen 3, the same family, has none;
  // Zen 5 is 0x1a): the one CPU where the L2 form measured faster.
  return amd && family == 0x19 && avx512;
}

bool decode_prefetch_to_l2() noexcept {
  const CpuFeatures& f = cpu_features();  // cached; the variable is read per call (tests switch it)
  return decode_prefetch_rule(std::getenv("FLASHATTN_CPU_DECODE_PREFETCH"), f.amd, f.family, f.avx512);
}

namespace {

// The default order: AMX; AVX512-BF16 on AMD CPUs; AVX-512, AVX2, scalar.
// The AVX512-BF16 path (bf16 GEMMs on VDPBF16PS dot products) is the
// default only where it was measured to win: on a Zen 4 EPYC, where a
// VDPBF16PS does twice an FP32 FMA's multiply-adds at the same rate, its bf16
// forward and backward ran 1.4-2.1x the AVX-512 path's (bench/NOTES.md,
// "bf16 on AVX512-BF16 by default on AMD"); on the two Intel CPUs it was
// measured on (Sapphire Rapids class, where VDPBF16PS issues at the rate of
// two FP32 FMAs: 0.7x; a Xeon VM with avx512_bf16 but no AMX: 0.6x) it lost
// to widening bf16 into the fp32 kernels, so there it runs only when asked.
Isa best_supported() {
  if (supported(Isa::Amx)) return Isa::Amx;
  if (cpu_features().amd && supported(Isa::Avx512Bf16)) return Isa::Avx512Bf16;
  for (Isa isa : {Isa::Avx512, Isa::Avx2})
    if (supported(isa)) return isa;
  return Isa::Scalar;
}

// FLASHATTN_CPU_ISA=scalar|avx2|avx512|avx512_bf16|amx picks a path (tests
// run every path on one machine): the one named when the CPU has it, else
// the best default path below it.
const KernelTable& select() {
  Isa isa = best_supported();
  if (const char* env = std::getenv("FLASHATTN_CPU_ISA")) {
    Isa want = isa;
    if (!std::strcmp(env, "scalar")) want = Isa::Scalar;
    else if (!std::strcmp(env, "avx2")) want = Isa::Avx2;
    else if (!std::strcmp(env, "avx512")) want = Isa::Avx512;
    else if (!std::strcmp(env, "avx512_bf16")) want = Isa::Avx512Bf16;
    else if (!std::strcmp(env, "amx")) want = Isa::Amx;
    if (supported(want)) {
      isa = want;
    } else {
      for (Isa lower : {Isa::Avx512, Isa::Avx2, Isa::Scalar})
        if (lower < want && supported(lower)) { isa = lower; break; }
    }
  }
  switch (isa) {
#if defined(__x86_64__) || defined(_M_X64)
#if defined(FLASHATTN_CPU_AMX)
    case Isa::Amx: return kernels_amx();
    case Isa::Avx512Bf16: return kernels_avx512bf16();
#endif
    case Isa::Avx512: return kernels_avx512();
    case Isa::Avx2: return kernels_avx2();
#endif
    default: return kernels_scalar();
  }
}

int thread_count(int64_t tasks) {
  int64_t n = omp_get_max_threads();
  if (n > tasks) n = tasks;
  return n < 1 ? 1 : int(n);
}

struct Scratch {
  float* data = nullptr;
  explicit Scratch(size_t bytes) {
    if (bytes) data = static_cast<float*>(std::aligned_alloc(64, bytes));
  }
  ~Scratch() { std::free(data); }
};

// The kernels' workspace of one call: the calling thread's kept buffer,
// grown to the largest call up to kKeptWorkspaceBytes, else memory of its
// own. A fresh allocation of a few MiB comes back from the OS to be
// page-faulted and zeroed on every call (a tenth of a short AMX call:
// bench/NOTES.md, "CPU workspace kept between calls"); the kept one does not.
// Nothing in it is assumed zero: the kernels write what they read.
constexpr size_t kKeptWorkspaceBytes = size_t(64) << 20;
class KernelWorkspace {
 public:
  explicit KernelWorkspace(size_t bytes) {
    if (bytes == 0) return;
    Kept& k = kept();
    if (!k.busy && (bytes <= k.size || bytes <= kKeptWorkspaceBytes)) {
      if (bytes > k.size) {
        std::free(k.data);
        k.size = 0;
        k.data = static_cast<float*>(std::aligned_alloc(64, round_up64(bytes)));
        if (!k.data) return;
        k.size = bytes;
      }
      k.busy = true;  // a nested call (none today) gets memory of its own
      data = k.data;
      borrowed_ = true;
      return;
    }
    own_ = static_cast<float*>(std::aligned_alloc(64, round_up64(bytes)));
    data = own_;
  }
  ~KernelWorkspace() {
    if (borrowed_) kept().busy = false;
    std::free(own_);
  }
  KernelWorkspace(const KernelWorkspace&) = delete;
  KernelWorkspace& operator=(const KernelWorkspace&) = delete;
  float* data = nullptr;

 private:
  struct Kept {
    float* data = nullptr;
    size_t size = 0;
    bool busy = false;
    ~Kept() { std::free(data); }
  };
  static Kept& kept() {
    thread_local Kept k;
    return k;
  }
  static size_t round_up64(size_t n) { return (n + 63) / 64 * 64; }
  float* own_ = nullptr;
  bool borrowed_ = false;
};

Status no_memory(size_t bytes) {
  return Status::Error(ErrorCode::Internal,
                       "cpu backend: could not allocate " + std::to_string(bytes) +
                           " bytes of workspace");
}

// One element of a row of p.dtype (fp32, fp16 or bf16) as fp32, and back.
float load_elem(const void* row, int64_t j, DType dt) {
  if (dt == DType::F32) return static_cast<const float*>(row)[j];
  const uint16_t h = static_cast<const uint16_t*>(row)[j];
  return dt == DType::F16 ? f16_to_float(h) : bf16_to_float(h);
}
void store_elem(void* row, int64_t j, DType dt, float x) {
  if (dt == DType::F32) static_cast<float*>(row)[j] = x;
  else static_cast<uint16_t*>(row)[j] = dt == DType::F16 ? float_to_f16(x) : float_to_bf16(x);
}

// A row of head_dim elements rotated at position pos (common/rotary.hpp) into
// dst (not aliasing src).
void rotate_row(const FwdParams& p, const void* src, void* dst, int64_t pos) {
  const DType dt = p.dtype;
  for (int64_t j = 0; j < p.head_dim; ++j) {
    float y = load_elem(src, j, dt);
    if (j < p.rotary_dim) {
      const RotaryPair r = rotary_pair(j, p.rotary_dim, p.rotary_interleaved);
      const float c = load_elem(p.rotary_cos, pos * p.rotary_cos_stride + r.freq, dt);
      const float s = load_elem(p.rotary_sin, pos * p.rotary_sin_stride + r.freq, dt);
      y = rotary_apply(y, load_elem(src, r.partner, dt), c, s, r.sign);
    }
    store_elem(dst, j, dt, y);
  }
}

// KV-cache append: row s of k_new / v_new goes to cache row seqlens_k[b] + s
// of entry kv_batch_idx[b] (or b; through the block table when paged), k
// rotated at that position when rotary is on, before the attention reads
// the cache.
void append_kv(const FwdParams& p) {
  const size_t es = dtype_size(p.dtype), row = size_t(p.head_dim) * es;
  const int64_t n = p.batch * p.seqlens_k_add;
  auto cache_off = [&](const Strides& st, int64_t b, int64_t t, int64_t hk) {
    if (p.block_table) {
      const int64_t page = p.block_table[b * p.block_table_stride + t / p.page_size];
      return page * st.batch + (t % p.page_size) * st.seq + hk * st.head;
    }
    const int64_t e = p.kv_batch_idx ? p.kv_batch_idx[b] : b;
    return e * st.batch + t * st.seq + hk * st.head;
  };
#pragma omp parallel for schedule(static) num_threads(thread_count(n))
  for (int64_t x = 0; x < n; ++x) {
    const int64_t b = x / p.seqlens_k_add, s = x % p.seqlens_k_add, t = p.seqlens_k[b] + s;
    for (int64_t hk = 0; hk < p.heads_kv; ++hk) {
      const auto* kn = static_cast<const char*>(p.k_new) +
                       (b * p.knew_str.batch + s * p.knew_str.seq + hk * p.knew_str.head) * es;
      const auto* vn = static_cast<const char*>(p.v_new) +
                       (b * p.vnew_str.batch + s * p.vnew_str.seq + hk * p.vnew_str.head) * es;
      char* kc = static_cast<char*>(const_cast<void*>(p.k)) + cache_off(p.k_str, b, t, hk) * es;
      if (p.rotary_cos) rotate_row(p, kn, kc, t);
      else std::memcpy(kc, kn, row);
      std::memcpy(static_cast<char*>(const_cast<void*>(p.v)) + cache_off(p.v_str, b, t, hk) * es, vn, row);
    }
  }
}

// KV-cache rotary embedding of q: a contiguous [B, Sq, Hq, D] copy.
size_t rotary_q_bytes(const FwdParams& p) {
  return p.rotary_cos ? size_t(p.batch * p.seqlen_q * p.heads_q * p.head_dim) * dtype_size(p.dtype) : 0;
}
void rotate_q(const FwdParams& p, void* dst) {
  const size_t es = dtype_size(p.dtype);
  const bool per_row = rotary_q_per_row(p);
  const int64_t n = p.batch * p.seqlen_q;
#pragma omp parallel for schedule(static) num_threads(thread_count(n))
  for (int64_t x = 0; x < n; ++x) {
    const int64_t b = x / p.seqlen_q, i = x % p.seqlen_q;
    const int64_t pos = rotary_q_position(per_row, p.seqlens_k[b], i);
    for (int64_t h = 0; h < p.heads_q; ++h) {
      const auto* src = static_cast<const char*>(p.q) + (b * p.q_str.batch + i * p.q_str.seq + h * p.q_str.head) * es;
      rotate_row(p, src, static_cast<char*>(dst) + size_t((x * p.heads_q + h) * p.head_dim) * es, pos);
    }
  }
}

// Host memory and row copies for common/head_dim_pad.hpp (v with a head
// dim of its own, head dims not a multiple of 8): one allocation, rows
// copied in parallel.
class PadOps {
 public:
  Status check(const head_dim_pad::Rows&, size_t) { return Status::Ok(); }  // rows of any stride
  Status alloc(size_t bytes, void** base) {
    scratch_ = std::make_unique<Scratch>(bytes);
    if (bytes && !scratch_->data) return no_memory(bytes);
    *base = scratch_->data;
    return Status::Ok();
  }
  Status pad(const head_dim_pad::Rows& src, void* dst, int64_t width, size_t es) {
    for_rows(src, es, [&](int64_t r, const char* row) {
      char* d = static_cast<char*>(dst) + size_t(r * width) * es;
      std::memcpy(d, row, size_t(src.cols) * es);
      std::memset(d + size_t(src.cols) * es, 0, size_t(width - src.cols) * es);
    });
    return Status::Ok();
  }
  Status crop(const void* src, int64_t width, const head_dim_pad::Rows& dst, size_t es) {
    for_rows(dst, es, [&](int64_t r, const char* row) {
      std::memcpy(const_cast<char*>(row), static_cast<const char*>(src) + size_t(r * width) * es,
                  size_t(dst.cols) * es);
    });
    return Status::Ok();
  }

 private:
  // f(row index in [n0, n1, heads] order, address of the row in t).
  template <class F>
  static void for_rows(const head_dim_pad::Rows& t, size_t es, F f) {
    const int64_t n = t.count();
#pragma omp parallel for schedule(static) num_threads(thread_count(n))
    for (int64_t r = 0; r < n; ++r) {
      const int64_t h = r % t.heads, s = r / t.heads % t.n1, a = r / t.heads / t.n1;
      f(r, static_cast<const char*>(t.ptr) + size_t(a * t.str.batch + s * t.str.seq + h * t.str.head) * es);
    }
  }
  std::unique_ptr<Scratch> scratch_;
};

}  // namespace

const char* isa_name() noexcept { return select().name; }

size_t forward_workspace_bytes(const FwdParams& p) noexcept {
  // fp8 first, as forward() goes: the fp32 copies are padded, if at all.
  if (p.dtype == DType::F8E4M3) return fp8_copy_bytes(p) + forward_workspace_bytes(fp8_as_fp32_shape(p));
  if (head_dim_pad::needed(p)) {
    size_t pad = 0;
    const FwdParams w = head_dim_pad::padded_shape(p, &pad);
    return pad + forward_workspace_bytes(w);
  }
  const KernelTable& k = select();
  const int64_t tasks = k.forward_tasks(p);
  if (tasks == 0) return 0;
  return rotary_q_bytes(p) + k.forward_workspace_floats(p, thread_count(tasks)) * sizeof(float);
}

size_t backward_workspace_bytes(const BwdParams& p) noexcept {
  if (head_dim_pad::needed(p)) {
    size_t pad = 0;
    const BwdParams w = head_dim_pad::padded_shape(p, &pad);
    return pad + backward_workspace_bytes(w);
  }
  const KernelTable& k = select();
  const int64_t tasks = k.backward_tasks(p);
  if (tasks == 0) return 0;
  return k.backward_workspace_floats(p, thread_count(tasks)) * sizeof(float);
}

Status forward(const FwdParams& p) noexcept {
  if (p.dtype == DType::F8E4M3) return fp8_forward(p, &forward);
  try {
    if (head_dim_pad::needed(p)) {
      PadOps ops;
      return head_dim_pad::call(p, ops, [](const FwdParams& w) { return forward(w); });
    }
    if (p.k_new && p.seqlens_k_add > 0) append_kv(p);
    // The kernels write the keep bits of visible entries only; the rest of
    // the returned mask (outside the causal/window mask) reads 0.
    if (p.dropout_mask) {
      std::memset(p.dropout_mask, 0,
                  sizeof(int32_t) * size_t(p.batch * p.heads_q * p.seqlen_q * p.seqlen_k));
    }
    const KernelTable& k = select();
    const int64_t tasks = k.forward_tasks(p);
    if (tasks == 0) return Status::Ok();
    const int nt = thread_count(tasks);
    const size_t bytes = k.forward_workspace_floats(p, nt) * sizeof(float);
    const size_t q_bytes = rotary_q_bytes(p);
    KernelWorkspace ws(bytes);
    Scratch q_rot(q_bytes);
    if (bytes && !ws.data) return no_memory(bytes);
    if (q_bytes && !q_rot.data) return no_memory(q_bytes);
    if (q_bytes == 0) {
      k.forward(p, ws.data, nt);
      return Status::Ok();
    }
    rotate_q(p, q_rot.data);
    FwdParams pr = p;
    pr.q = q_rot.data;
    pr.q_str = {p.seqlen_q * p.heads_q * p.head_dim, p.heads_q * p.head_dim, p.head_dim};
    k.forward(pr, ws.data, nt);
    return Status::Ok();
  } catch (const std::bad_alloc&) {
    return Status::Error(ErrorCode::Internal, "cpu backend: out of memory");
  }
}

Status backward(const BwdParams& p) noexcept {
  try {
    if (head_dim_pad::needed(p)) {
      PadOps ops;
      return head_dim_pad::call(p, ops, [](const BwdParams& w) { return backward(w); });
    }
    const KernelTable& k = select();
    const int64_t tasks = k.backward_tasks(p);
    if (tasks == 0) return Status::Ok();
    const int nt = thread_count(tasks);
    const size_t bytes = k.backward_workspace_floats(p, nt) * sizeof(float);
    KernelWorkspace ws(bytes);
    if (bytes && !ws.data) return no_memory(bytes);
    k.backward(p, ws.data, nt);
    return Status::Ok();
  } catch (const std::bad_alloc&) {
    return Status::Error(ErrorCode::Internal, "cpu backend: out of memory");
  }
}

}  // namespace flashattn::detail::cpu
