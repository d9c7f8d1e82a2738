#!/usr/bin/env bash
# Device call 2: 16-bit head dims below a tile (8, 72, 96, 192, ...) on the Hopper forward.
L=/tmp/l; mkdir -p $L $OUT/logs
xz -dc build-lead/c1/lib.so.xz > $L/lib.so; xz -dc build-lead/c1/gpu_tests.xz > $L/gpu_tests; chmod +x $L/gpu_tests
export FLASHATTN_LIBRARY=$L/lib.so PYTHONPATH=$PWD/python PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader > $OUT/logs/gpu.txt
echo "== which kernels run (torch.profiler) =="
python3 - <<'PY' 2>&1 | tee $OUT/logs/kernels.txt
import torch, flashattn
from torch.profiler import profile, ProfilerActivity
for d in (8, 72, 96, 128, 192):
    q, k, v = (torch.randn(2, 300, 4, d, device="cuda", dtype=torch.bfloat16) for _ in range(3))
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        flashattn.flash_attn_func(q, k, v, causal=True); torch.cuda.synchronize()
    names = sorted({e.name[:60] for e in prof.events() if e.device_type == torch.autograd.DeviceType.CUDA})
    print(d, names)
PY
echo "== GPU tests (whole binary) =="
timeout 330 $L/gpu_tests --gtest_brief=1 > $OUT/logs/gpu-tests.log 2>&1; echo rc=$?
grep -E "FAILED|^\[====|PASSED|SKIPPED \]" $OUT/logs/gpu-tests.log | head -30
small='Small/Forward.*d72*:Large/Forward.*d192*:Small/Forward.*d8_*'
for tool in memcheck racecheck synccheck; do
  timeout 60 compute-sanitizer --tool $tool --print-limit 10 $L/gpu_tests --gtest_brief=1 \
    --gtest_filter="Small/Forward.*cuda*_q113_k17_*d72*:Small/Forward.*cuda*_q17_k113_*d8_*:Large/Forward.*cuda_bf16*d192*" > $OUT/logs/san-$tool.log 2>&1
  echo "$tool: $(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY|PASSED|tests ran' $OUT/logs/san-$tool.log | tr '\n' ' ')"
done
echo "== bench: head dims 96 / 192 (sm90 / sm80 / cuDNN) =="
for r in 1 2; do
  timeout 60 python3 bench/gpu/bench_peers.py $OUT/logs/hd-sm90-r$r.csv --hdims 96,192 --seqlens 1024,4096,16384 --passes fwd --impls flashattn,sdpa_cudnn | grep -v "^#"
  FLASHATTN_DISABLE_SM90=1 timeout 60 python3 bench/gpu/bench_peers.py $OUT/logs/hd-sm80-r$r.csv --hdims 96,192 --seqlens 1024,4096,16384 --passes fwd --impls flashattn | grep -v "^#"
done
cd $OUT && tar czf logs.tgz logs
