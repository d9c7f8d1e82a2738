// Tells whether this build has machine code (or PTX) the current device can
// run: a trivial kernel compiled with the same -gencode flags as the kernels.
#include <cuda_runtime.h>

namespace flashattn::detail::cuda {

__global__ void probe_kernel() {}

cudaError_t probe_kernel_image() {
  cudaFuncAttributes attr;
  return cudaFuncGetAttributes(&attr, probe_kernel);
}

}  // namespace flashattn::detail::cuda
