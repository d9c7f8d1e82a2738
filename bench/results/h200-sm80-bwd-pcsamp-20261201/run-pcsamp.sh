#!/usr/bin/env bash
# Where the sm80 backward (e453e24) stalls, per SASS instruction: ncu SourceCounters (PC sampling), head dim 128, 4k.
set -uo pipefail
xz -dc build-lead/ab/libA.so.xz > /tmp/libA.so
L=$OUT/logs; mkdir -p $L
export PYTHONPATH=$PWD/python PYTHONUNBUFFERED=1 FLASHATTN_DISABLE_SM90=1 FLASHATTN_LIBRARY=/tmp/libA.so
ncu --version | tail -1
timeout 200 ncu -o /tmp/rep --kernel-name regex:"bwd_kernel|flash_bwd_dq_dk_dv" --section SourceCounters --section WarpStateStats python3 bench/gpu/ncu_bwd_pair.py --hdim 128 --seqlen 4096 > $L/ncu-src.log 2>&1; echo "ncu rc=$?"
ncu -i /tmp/rep.ncu-rep --page source --csv --print-source sass > $L/src.csv 2> $L/src.err; echo "src rc=$? $(wc -c < $L/src.csv)"
ncu -i /tmp/rep.ncu-rep --page details --print-details all > $L/details.txt 2>&1; echo "details rc=$?"
cp /tmp/rep.ncu-rep $L/ 2>/dev/null
cd $OUT && tar czf logs.tgz logs && rm -rf logs
