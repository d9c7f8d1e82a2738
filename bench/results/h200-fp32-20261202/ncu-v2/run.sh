#!/usr/bin/env bash
# Session 20, device call 4: Nsight Compute on the fp32 kernels (head dim 128, 4k tokens, fwd + bwd) and their SASS mix.
set -u
O=$OUT/logs; mkdir -p $O
xz -dc build-lead/c1/libflashattn.so.xz > /tmp/libB.so
export FLASHATTN_LIBRARY=/tmp/libB.so PYTHONPATH=$PWD/python PYTHONUNBUFFERED=1
cat > /tmp/p.py <<'PY'
import torch
from flashattn import flash_attn_func
g = torch.Generator(device="cuda").manual_seed(0)
q, k, v, do = (torch.randn(4, 4096, 16, 128, device="cuda", generator=g) for _ in range(4))
for x in (q, k, v): x.requires_grad_()
flash_attn_func(q, k, v).backward(do)
torch.cuda.synchronize()
PY
timeout 200 ncu --kernel-name regex:"fwd_kernel|bwd_dkdv_kernel|bwd_dq_kernel" --launch-count 3 --section SpeedOfLight --section ComputeWorkloadAnalysis \
  --section WarpStateStats --section Occupancy --section LaunchStats --section MemoryWorkloadAnalysis_Tables \
  --section InstructionStats python3 /tmp/p.py > $O/ncu-f32.txt 2>&1; echo "ncu rc=$?"
grep -E "fwd_kernel|bwd_dkdv|bwd_dq_kernel|Duration|Issue Slots Busy|Executed Ipc A|Achieved Occupancy|Theoretical Occupancy|Registers Per|Stall|Warp Cycles Per Issued|Block Limit|Shared Memory Configuration|Bank|No Eligible|Active Warps Per" $O/ncu-f32.txt | head -90
cd $OUT && tar czf logs.tgz logs
