#!/usr/bin/env bash
# Where the sm80 decode step's time goes: Nsight Compute (full set + PC sampling) of the
# attention and combine kernels at 1 x 8k, 1 x 32k and 8 x 8k (bench_decode.py's grid),
# library of f0f6f08 (CUDA code of 3d72173).
set -uo pipefail
L=$OUT/logs; mkdir -p $L
xz -dc build-lead/s30a/A.so.xz > /tmp/A.so
export PYTHONPATH=$PWD/python PYTHONUNBUFFERED=1 FLASHATTN_LIBRARY=/tmp/A.so
ncu --version | tail -1
for s in "1 8192" "1 32768" "8 8192"; do
  set -- $s; n=b$1-k$2
  timeout 150 ncu -o /tmp/$n --set full --section SourceCounters --section WarpStateStats \
    --kernel-name regex:"fwd_kernel|combine_kernel" --launch-skip 6 --launch-count 2 \
    python3 bench/gpu/ncu_decode_step.py --batch $1 --context $2 > $L/ncu-$n.log 2>&1; echo "ncu $n rc=$?"
  ncu -i /tmp/$n.ncu-rep --page details --print-details all > $L/details-$n.txt 2>&1
  ncu -i /tmp/$n.ncu-rep --page source --csv --print-source sass > $L/src-$n.csv 2> /dev/null
  mkdir -p $L/$n && cp $L/details-$n.txt $L/$n/details.txt && cp $L/src-$n.csv $L/$n/src.csv
  python3 bench/gpu/ncu_stall_hotspots.py $L/$n stall_long_sb,stall_barrier,stall_wait > $L/hot-$n.txt 2>&1
  grep -E "Duration|DRAM Throughput|Memory Throughput|Achieved Occupancy|Registers Per|Waves Per SM|Block Size|Grid Size" $L/details-$n.txt | head -24
  head -12 $L/hot-$n.txt
done
cd $OUT && tar czf logs.tgz logs && rm -rf logs
