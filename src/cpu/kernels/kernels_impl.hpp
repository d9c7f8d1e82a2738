// Instantiates the CPU kernels for one ISA; included once by each
// kernels_<isa>.cpp after it defines FA_ISA_NS, FA_VW, FA_MR, FA_NV.
#pragma once

#include "cpu/kernel_table.hpp"
#include "backward.hpp"
#include "forward.hpp"

namespace flashattn::detail::cpu {

const KernelTable& FA_KERNEL_TABLE_FN() {
  static const KernelTable table = {
      FA_ISA_NAME,
      &FA_ISA_NS::forward_tasks,
      &FA_ISA_NS::backward_tasks,
      &FA_ISA_NS::forward_workspace_floats,
      &FA_ISA_NS::backward_workspace_floats,
      &FA_ISA_NS::forward,
      &FA_ISA_NS::backward,
  };
  return table;
}

}  // namespace flashattn::detail::cpu
