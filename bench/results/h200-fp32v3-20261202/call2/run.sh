#!/usr/bin/env bash
# Session 21, device call 2: fp32 CUDA v3 as committed (9e6a6de + the ring-only forward): the fp32 GPU tests,
# sanitizers on small fp32 shapes, Nsight Compute (PC-sampled stalls, shared-memory wavefronts) on the head dim 128
# kernels, and the full fp32 grid against SDPA.
set -u
O=$OUT/logs; mkdir -p $O
xz -dc build-lead/c1/libflashattn.so.xz > /tmp/libB.so
xz -dc build-lead/c1/gpu_tests.xz > /tmp/gpu_tests; chmod +x /tmp/gpu_tests
export FLASHATTN_LIBRARY=/tmp/libB.so PYTHONPATH=$PWD/python PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee $O/device.txt
t0=$SECONDS
timeout 150 /tmp/gpu_tests --gtest_brief=1 --gtest_filter='*f32*' > $O/gpu-f32.log 2>&1; echo "f32 tests rc=$? t=$((SECONDS-t0))"
grep -E "^\[====|PASSED \]|FAILED" $O/gpu-f32.log | head -12
RF='Small/Forward*cuda_f32*q113_k17_h4x2*:Small/Forward*cuda_f32*q17_k113_h4x2*:*KvCache*f32*page*:*VarlenForward*f32*'
timeout 70 compute-sanitizer --tool racecheck --print-limit 20 /tmp/gpu_tests --gtest_brief=1 --gtest_filter="$RF" > $O/san-racecheck-fwd.log 2>&1
echo "racecheck fwd rc=$? t=$((SECONDS-t0))"; tail -n 2 $O/san-racecheck-fwd.log
for tool in synccheck memcheck; do
  timeout 40 compute-sanitizer --tool $tool --print-limit 20 /tmp/gpu_tests --gtest_brief=1 --gtest_filter="$RF" > $O/san-$tool-fwd.log 2>&1
  echo "$tool fwd rc=$? t=$((SECONDS-t0))"; tail -n 1 $O/san-$tool-fwd.log
done
cat > /tmp/p.py <<'PY'
import torch
from flashattn import flash_attn_func
g = torch.Generator(device="cuda").manual_seed(0)
q, k, v, do = (torch.randn(2, 4096, 16, 128, device="cuda", generator=g) for _ in range(4))
for x in (q, k, v): x.requires_grad_()
flash_attn_func(q, k, v).backward(do)
torch.cuda.synchronize()
PY
timeout 150 ncu -o /tmp/rep --kernel-name regex:"fwd_kernel|bwd_dkdv_kernel|bwd_dq_kernel" --launch-count 3 \
  --section SpeedOfLight --section Occupancy --section LaunchStats --section InstructionStats \
  --section WarpStateStats --section SourceCounters --section MemoryWorkloadAnalysis_Tables python3 /tmp/p.py > $O/ncu-run.log 2>&1
echo "ncu rc=$? t=$((SECONDS-t0))"; tail -n 3 $O/ncu-run.log
ncu -i /tmp/rep.ncu-rep --page details --print-details all > $O/details.txt 2>&1
ncu -i /tmp/rep.ncu-rep --page source --csv --print-source sass > $O/src.csv 2>&1
python3 bench/gpu/ncu_stall_hotspots.py $O stall_long_sb,stall_short_sb,stall_mio_throttle,stall_barrier,stall_math > $O/stall-hotspots.txt 2>&1
head -c 5000 $O/stall-hotspots.txt
grep -E "fwd_kernel|bwd_dkdv|bwd_dq_kernel|Duration|Registers Per|Achieved Occ|Issue Slots|Shared Load|Shared Store|L1/TEX Cache Throughput" $O/details.txt | head -40
xz -T4 -6 $O/src.csv
timeout 260 python3 bench/gpu/bench_fp32.py $O/h200-fp32.csv > $O/bench-fp32.log 2>&1; echo "bench rc=$? t=$((SECONDS-t0))"
grep "accuracy" $O/bench-fp32.log | head -24
cd $OUT && tar czf logs.tgz logs
