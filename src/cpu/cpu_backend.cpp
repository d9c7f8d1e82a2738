// CPU backend: picks the kernel table for this CPU (once per call), sizes and
// allocates the scratch (exactly what workspace_bytes reports), runs.
#include "cpu_backend.hpp"

#include <omp.h>

#include <cstdlib>
#include <cstring>
#include <new>
#include <string>

#include "kernel_table.hpp"

namespace flashattn::detail::cpu {
namespace {

enum class Isa { Scalar = 0, Avx2 = 1, Avx512 = 2 };

Isa best_supported() {
#if defined(__x86_64__) || defined(_M_X64)
  __builtin_cpu_init();
  const bool avx2 = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") &&
                    __builtin_cpu_supports("f16c");
  const bool avx512 = avx2 && __builtin_cpu_supports("avx512f") &&
                      __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512vl") &&
                      __builtin_cpu_supports("avx512dq");
  if (avx512) return Isa::Avx512;
  if (avx2) return Isa::Avx2;
#endif
  return Isa::Scalar;
}

// FLASHATTN_CPU_ISA=scalar|avx2|avx512 caps the choice (tests run every
// path on one machine); a request above what the CPU has is lowered.
const KernelTable& select() {
  Isa isa = best_supported();
  if (const char* env = std::getenv("FLASHATTN_CPU_ISA")) {
    Isa want = isa;
    if (!std::strcmp(env, "scalar")) want = Isa::Scalar;
    else if (!std::strcmp(env, "avx2")) want = Isa::Avx2;
    else if (!std::strcmp(env, "avx512")) want = Isa::Avx512;
    if (want < isa) isa = want;
  }
  switch (isa) {
#if defined(__x86_64__) || defined(_M_X64)
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

Status no_memory(size_t bytes) {
  return Status::Error(ErrorCode::Internal,
                       "cpu backend: could not allocate " + std::to_string(bytes) +
                           " bytes of workspace");
}

}  // namespace

const char* isa_name() noexcept { return select().name; }

size_t forward_workspace_bytes(const FwdParams& p) noexcept {
  const KernelTable& k = select();
  const int64_t tasks = k.forward_tasks(p);
  if (tasks == 0) return 0;
  return k.forward_workspace_floats(p, thread_count(tasks)) * sizeof(float);
}

size_t backward_workspace_bytes(const BwdParams& p) noexcept {
  const KernelTable& k = select();
  const int64_t tasks = k.backward_tasks(p);
  if (tasks == 0) return 0;
  return k.backward_workspace_floats(p, thread_count(tasks)) * sizeof(float);
}

Status forward(const FwdParams& p) noexcept {
  try {
    const KernelTable& k = select();
    const int64_t tasks = k.forward_tasks(p);
    if (tasks == 0) return Status::Ok();
    const int nt = thread_count(tasks);
    const size_t bytes = k.forward_workspace_floats(p, nt) * sizeof(float);
    Scratch ws(bytes);
    if (bytes && !ws.data) return no_memory(bytes);
    k.forward(p, ws.data, nt);
    return Status::Ok();
  } catch (const std::bad_alloc&) {
    return Status::Error(ErrorCode::Internal, "cpu backend: out of memory");
  }
}

Status backward(const BwdParams& p) noexcept {
  try {
    const KernelTable& k = select();
    const int64_t tasks = k.backward_tasks(p);
    if (tasks == 0) return Status::Ok();
    const int nt = thread_count(tasks);
    const size_t bytes = k.backward_workspace_floats(p, nt) * sizeof(float);
    Scratch ws(bytes);
    if (bytes && !ws.data) return no_memory(bytes);
    k.backward(p, ws.data, nt);
    return Status::Ok();
  } catch (const std::bad_alloc&) {
    return Status::Error(ErrorCode::Internal, "cpu backend: out of memory");
  }
}

}  // namespace flashattn::detail::cpu
