#!/usr/bin/env bash
# Stall reasons of the sm80 backward (e453e24 kernels) against FA2's, head dim 128, 4k (ncu WarpStateStats).
set -uo pipefail
xz -dc build-lead/ab/libA.so.xz > /tmp/libA.so
L=$OUT/logs; mkdir -p $L
export PYTHONPATH=$PWD/python PYTHONUNBUFFERED=1 FLASHATTN_DISABLE_SM90=1 FLASHATTN_LIBRARY=/tmp/libA.so
timeout 200 ncu --kernel-name regex:"bwd_kernel|flash_bwd_dq_dk_dv" --section WarpStateStats --section SchedulerStats --section LaunchStats --section Occupancy --metrics l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_ld.sum,l1tex__data_pipe_lsu_wavefronts_mem_shared_op_ld.sum,smsp__inst_executed_op_ldsm.sum,smsp__inst_executed_op_shared_ld.sum,smsp__inst_executed_op_shared_st.sum python3 bench/gpu/ncu_bwd_pair.py --hdim 128 --seqlen 4096 > $L/ncu-stalls-bwd-d128-4k.txt 2>&1; echo "ncu rc=$?"
cd $OUT && tar czf logs.tgz logs && rm -rf logs
