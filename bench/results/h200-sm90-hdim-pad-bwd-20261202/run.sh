#!/usr/bin/env bash
# Device call 3: 16-bit head dims below a tile on the Hopper backward (and forward again).
L=/tmp/l; mkdir -p $L $OUT/logs
xz -dc build-lead/c1/lib.so.xz > $L/lib.so; xz -dc build-lead/c1/gpu_tests.xz > $L/gpu_tests; chmod +x $L/gpu_tests
export FLASHATTN_LIBRARY=$L/lib.so PYTHONPATH=$PWD/python PYTHONUNBUFFERED=1
echo "== which kernels run (torch.profiler, forward + backward) =="
python3 - <<'PY' 2>&1 | grep -v Warn | tee $OUT/logs/kernels.txt
import torch, flashattn
from torch.profiler import profile, ProfilerActivity
for d in (8, 72, 96, 192):
    q, k, v = (torch.randn(2, 300, 4, d, device="cuda", dtype=torch.bfloat16, requires_grad=True) for _ in range(3))
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        o = flashattn.flash_attn_func(q, k, v, causal=True); o.sum().backward(); torch.cuda.synchronize()
    names = sorted({e.name[:48] for e in prof.events() if e.device_type == torch.autograd.DeviceType.CUDA and "flashattn" in e.name})
    print(d, names)
PY
echo "== GPU tests (whole binary) =="
timeout 300 $L/gpu_tests --gtest_brief=1 > $OUT/logs/gpu-tests.log 2>&1; echo rc=$?
grep -E "FAILED|^\[====|PASSED|SKIPPED \]" $OUT/logs/gpu-tests.log | head -30
for tool in memcheck racecheck synccheck initcheck; do
  timeout 75 compute-sanitizer --tool $tool --print-limit 10 $L/gpu_tests --gtest_brief=1 \
    --gtest_filter="Small/Backward.*cuda_bf16*_q113_k17_*d72*:Small/Backward.*cuda_f16*_q17_k113_*d8_*:Large/Backward.*cuda_bf16*_q267_k17_*d192*:Large/Backward.*cuda_bf16*_q17_k267_*d192*" > $OUT/logs/san-$tool.log 2>&1
  echo "$tool: $(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY|PASSED|tests ran' $OUT/logs/san-$tool.log | tr '\n' ' ')"
done
echo "== bench: head dims 96 / 192, backward (sm90 / sm80 / cuDNN) =="
for r in 1 2; do
  timeout 80 python3 bench/gpu/bench_peers.py $OUT/logs/hd-sm90-r$r.csv --hdims 96,192 --seqlens 1024,4096,16384 --passes fwd,bwd --impls flashattn,sdpa_cudnn | grep -v "^#"
  FLASHATTN_DISABLE_SM90=1 timeout 60 python3 bench/gpu/bench_peers.py $OUT/logs/hd-sm80-r$r.csv --hdims 96,192 --seqlens 1024,4096,16384 --passes bwd --impls flashattn | grep -v "^#"
done
cd $OUT && tar czf logs.tgz logs
