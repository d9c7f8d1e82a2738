#!/usr/bin/env bash
# Why are padded tiles slower? ncu on the sm80 forward (hd 256) and backward (hd 128), padded (B) vs swizzled (C fwd / A bwd).
set -uo pipefail
mkdir -p build-h200/src
xz -dc build-lead/c1/src__libflashattn.so.0.1.0.xz > /tmp/libB.so
xz -dc build-lead/ab/libA.so.xz > /tmp/libA.so; xz -dc build-lead/ab/libC.so.xz > /tmp/libC.so
L=$OUT/logs; mkdir -p $L
export PYTHONPATH=$PWD/python PYTHONUNBUFFERED=1 FLASHATTN_DISABLE_SM90=1
M=gpu__time_duration.sum,smsp__inst_executed.sum,l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_ld.sum,l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_st.sum,l1tex__data_pipe_lsu_wavefronts_mem_shared_op_ld.sum,l1tex__data_pipe_lsu_wavefronts_mem_shared_op_st.sum,smsp__warp_issue_stalled_short_scoreboard_per_warp_active.pct,smsp__warp_issue_stalled_mio_throttle_per_warp_active.pct,smsp__warp_issue_stalled_long_scoreboard_per_warp_active.pct,sm__warps_active.avg.pct_of_peak_sustained_active
for s in B C A; do
  case $s in A) lib=/tmp/libA.so; h=128;; B) lib=/tmp/libB.so; h=256;; C) lib=/tmp/libC.so; h=256;; esac
  FLASHATTN_LIBRARY=$lib timeout 120 ncu --kernel-name regex:"^(fwd_kernel|bwd_kernel)" --metrics $M python3 bench/gpu/ncu_bwd_pair.py --hdim $h --seqlen 4096 > $L/ncu-$s-hd$h.txt 2>&1; echo "ncu $s rc=$?"
done
FLASHATTN_LIBRARY=/tmp/libB.so timeout 120 ncu --kernel-name regex:"^(fwd_kernel|bwd_kernel)" --metrics $M python3 bench/gpu/ncu_bwd_pair.py --hdim 128 --seqlen 4096 > $L/ncu-B-hd128.txt 2>&1; echo "ncu B128 rc=$?"
cd $OUT && tar czf logs.tgz logs && rm -rf logs
