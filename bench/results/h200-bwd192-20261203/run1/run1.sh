#!/usr/bin/env bash
# Head dim 192 on its own Hopper backward tile. A = the library before
# (192 on the 256 tile), B = with the 192 tile. SASS of the new kernel, GPU
# tests (192-specific first, then the backward sweep as regression),
# memcheck / racecheck / synccheck on small 192 backward cases, then the
# backward benchmark with A and B alternated, two rounds.
set -uo pipefail
L=$OUT/logs; mkdir -p $L
D=build-lead/bwd192
for x in A B; do xz -dc $D/$x.so.xz > /tmp/$x.so; done
cp /tmp/B.so /tmp/libflashattn.so.0
xz -dc $D/flashattn_gpu_tests.xz > /tmp/gt; chmod +x /tmp/gt
export LD_LIBRARY_PATH=/tmp PYTHONPATH=$PWD/python PYTHONUNBUFFERED=1
t0=$SECONDS
cuobjdump -sass /tmp/B.so > /tmp/all.sass 2>/dev/null
python3 - /tmp/all.sass > $L/sass192-summary.txt <<'PY'
import re, sys
cur=None; stats={}
for line in open(sys.argv[1]):
    m=re.search(r'Function : (\S+)', line)
    if m: cur=m.group(1); stats[cur]={'HGMMA':0,'STL':0,'LDL':0,'n':0}; continue
    if cur is None: continue
    for k in ('HGMMA','STL','LDL'):
        if re.search(r'\b'+k+r'\b', line): stats[cur][k]+=1
    if re.search(r'/\*[0-9a-f]{4}\*/', line): stats[cur]['n']+=1
for f,s in stats.items():
    if 'bwd_kernel' in f and ('Li192' in f or 'Li256' in f): print(f, s)
PY
echo "sass: $(grep -c . $L/sass192-summary.txt) kernels; $(head -2 $L/sass192-summary.txt | cut -c1-200)"
F='*d192*:*d160*:*d176*:*HeadDim192*:*Varlen*:HeadDimV/*:*CudaVariants.Alibi*'
timeout 300 /tmp/gt --gtest_filter="$F" --gtest_brief=1 > $L/gpu-tests-192.log 2>&1; echo "gpu tests 192 rc=$? $(tail -2 $L/gpu-tests-192.log | tr '\n' ' ') t=$((SECONDS-t0))"
timeout 120 compute-sanitizer --tool memcheck /tmp/gt --gtest_filter='Large/Backward.*bf16*q267_k17_*d192*:Large/Backward.*f16*q17_k267_*d192*' --gtest_brief=1 > $L/memcheck.log 2>&1; echo "memcheck rc=$? $(grep -E 'ERROR SUMMARY' $L/memcheck.log | tail -1) t=$((SECONDS-t0))"
timeout 150 compute-sanitizer --tool racecheck /tmp/gt --gtest_filter='Large/Backward.*bf16*q267_k17_*d192*' --gtest_brief=1 > $L/racecheck.log 2>&1; echo "racecheck rc=$? $(grep -E 'RACECHECK SUMMARY|ERROR SUMMARY' $L/racecheck.log | tail -1) t=$((SECONDS-t0))"
timeout 100 compute-sanitizer --tool synccheck /tmp/gt --gtest_filter='Large/Backward.*bf16*q267_k17_*d192*' --gtest_brief=1 > $L/synccheck.log 2>&1; echo "synccheck rc=$? $(grep -E 'ERROR SUMMARY' $L/synccheck.log | tail -1) t=$((SECONDS-t0))"
for r in 1 2; do
  order="A B"; [ $r = 2 ] && order="B A"
  for x in $order; do
    FLASHATTN_LIBRARY=/tmp/$x.so FLASHATTN_COMMIT=$x timeout 150 python3 bench/gpu/bench_peers.py $L/peers-r$r-$x.csv --hdims 192 --passes bwd --impls flashattn,sdpa_flash,sdpa_cudnn > $L/peers-r$r-$x.log 2>&1; echo "peers r$r $x rc=$? t=$((SECONDS-t0))"
    FLASHATTN_LIBRARY=/tmp/$x.so FLASHATTN_COMMIT=$x timeout 100 python3 bench/gpu/bench_head_dim_v.py $L/hdv-r$r-$x.csv --passes bwd > $L/hdv-r$r-$x.log 2>&1; echo "hdv r$r $x rc=$? t=$((SECONDS-t0))"
  done
done
timeout 240 /tmp/gt --gtest_filter='*Backward*:*Determinis*:*CudaVariants*' --gtest_brief=1 > $L/gpu-tests-bwd.log 2>&1; echo "gpu tests bwd rc=$? $(tail -2 $L/gpu-tests-bwd.log | tr '\n' ' ') t=$((SECONDS-t0))"
for f in $L/peers-r1-B.csv $L/hdv-r1-B.csv $L/hdv-r1-A.csv; do echo "== $f"; cat $f; done
cd $OUT && tar czf logs.tgz logs && rm -rf logs
