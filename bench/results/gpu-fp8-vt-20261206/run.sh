#!/usr/bin/env bash
# Forty-sixth session: the fp8 forward's V transpose rewritten (fp8_v_transpose.cu: 128 x 128
# tiles, a lane's 16 keys x 4 columns transposed with byte permutes instead of one shared load
# per output byte), and fp8 head dim 128 on 128-row tiles for short calls.
# B = the library before (HEAD's kernels), N = the new transpose, M = N built with
# FLASHATTN_SM90_FP8_BLOCKM_HD128=128 (head dim 128 only). (1) N's fp8 GPU tests, racecheck and
# memcheck on small fp8 cases; the CLI --check with N and M. (2) bench_fp8 --kernels (the
# transpose's device time apart), fp8 and our bf16, head dim 128, B N M B N M.
set -uo pipefail
L=$OUT/logs; mkdir -p $L
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader > $L/gpu.txt; cat $L/gpu.txt
export PYTHONPATH=$PWD/python PYTHONUNBUFFERED=1
mkdir -p /tmp/B /tmp/N /tmp/M
xz -dc build-lead/new/lib.xz > /tmp/B/libflashattn.so.0
xz -dc build-lead/vt/lib.xz > /tmp/N/libflashattn.so.0
xz -dc build-lead/vt/m128-lib.xz > /tmp/M/libflashattn.so.0
xz -dc build-lead/vt/gpu-tests.xz > /tmp/gt; chmod +x /tmp/gt
t0=$SECONDS
/tmp/gt --gtest_filter='Sweep/Fp8Forward.*:Devices/Fp8Invalid.*' > $L/tests-fp8.log 2>&1
echo "tests rc=$? t=$((SECONDS-t0))"; tail -3 $L/tests-fp8.log
SMALL='Sweep/Fp8Forward.MatchesReference/*d128*:Sweep/Fp8Forward.MatchesReference/*d96*'
for tool in racecheck memcheck; do
  timeout 150 compute-sanitizer --tool $tool /tmp/gt --gtest_filter="$SMALL" > $L/san-$tool.log 2>&1
  echo "$tool rc=$? t=$((SECONDS-t0))"; grep -E 'ERROR SUMMARY|RACECHECK SUMMARY|PASSED|FAILED' $L/san-$tool.log | tail -3
done
for lib in N M; do for d in 64 96 128; do for c in "" "--causal"; do
  echo "== $lib d $d $c" >> $L/check.log
  LD_LIBRARY_PATH=/tmp/$lib build-lead/new/cli run --device cuda --dtype e4m3 --batch 2 --heads 4 --heads-kv 2 \
    --seqlen-q 300 --seqlen-k 517 --head-dim $d $c --check --check-heads 4 --repeat 1 2>&1 | grep "^check" >> $L/check.log
done; done; done
echo "checks t=$((SECONDS-t0))"; grep -c PASS $L/check.log; grep -v '^==' $L/check.log | grep -vc PASS
i=0
for lib in B N M B N M; do
  FLASHATTN_LIBRARY=/tmp/$lib/libflashattn.so.0 timeout 90 python3 bench/gpu/bench_fp8.py $L/fp8-$i-$lib.csv --hdims 128 \
    --seqlens 512,1024,2048,4096,16384 --impls flashattn_fp8,flashattn_bf16 --error-seqlen 0 --kernels > $L/fp8-$i-$lib.log 2>&1
  echo "fp8 $i $lib rc=$? t=$((SECONDS-t0))"; i=$((i+1))
done
cd $OUT && tar czf logs.tgz logs && rm -rf logs
