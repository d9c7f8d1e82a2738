#!/usr/bin/env bash
# Device call 1 (2026-12-03): the sm90a forward's head-dim-192 tile (128 x 112).
# Library and GPU test binary built here (scripts/build.sh), carried xz-compressed.
L=/tmp/l; mkdir -p $L $OUT/logs
xz -dc build-lead/c1/lib.so.xz > $L/lib.so; xz -dc build-lead/c1/gpu_tests.xz > $L/gpu_tests; chmod +x $L/gpu_tests
export FLASHATTN_LIBRARY=$L/lib.so PYTHONPATH=$PWD/python PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader > $OUT/logs/gpu.txt
echo "== SASS of the head-dim-192 forward (base kernel) =="
cuobjdump -sass -fun '_ZN9flashattn6detail4cuda4sm9010fwd_kernelINS2_9FwdTraitsI13__nv_bfloat16Li192ELi128EEELb0ELi0EEEvNS2_10KernelArgsE' $L/lib.so > $OUT/logs/sass-192.txt 2>&1
echo "HGMMA $(grep -c HGMMA $OUT/logs/sass-192.txt) STL $(grep -c 'STL' $OUT/logs/sass-192.txt) LDL $(grep -c 'LDL' $OUT/logs/sass-192.txt) lines $(wc -l < $OUT/logs/sass-192.txt)"
echo "== GPU tests (whole binary) =="
timeout 330 $L/gpu_tests --gtest_brief=1 > $OUT/logs/gpu-tests.log 2>&1; echo rc=$?
grep -E "FAILED|^\[====|PASSED|SKIPPED \]" $OUT/logs/gpu-tests.log | head -30
for tool in memcheck racecheck synccheck; do
  timeout 60 compute-sanitizer --tool $tool --print-limit 10 $L/gpu_tests --gtest_brief=1 \
    --gtest_filter="Large/Forward.*cuda_bf16*d192*:Large/Forward.*cuda_f16*d192*q17_k267*" > $OUT/logs/san-$tool.log 2>&1
  echo "$tool: $(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY|PASSED|tests ran' $OUT/logs/san-$tool.log | tr '\n' ' ')"
done
echo "== bench: head dim 192 forward (sm90 192 tile / cuDNN; sm80) =="
for r in 1 2; do
  timeout 150 python3 bench/gpu/bench_peers.py $OUT/logs/d192-sm90-r$r.csv --hdims 192 --seqlens 512,1024,2048,4096,8192,16384 --passes fwd --impls flashattn,sdpa_cudnn | grep -v "^#"
done
cd $OUT && tar czf logs.tgz logs
