#!/usr/bin/env bash
# Short causal forward, where cuDNN's kernels take 15-40% less time than ours (head dim 64 at 512
# tokens, 128 at 512): ncu of our forward kernel (full set, SASS stall samples) at head dims 64
# and 128, seqlen 512, batch 32, causal; and the launch configuration of cuDNN's kernel for the
# same shapes (LaunchStats / Occupancy / SpeedOfLight).
set -u
L=/tmp/l; mkdir -p $L/o; R=$OUT/r; mkdir -p $R
[ -f $L/o/libflashattn.so.0 ] || xz -dc build-lead/pp/old.so.xz > $L/o/libflashattn.so.0
xz -dc build-lead/pp/cli.xz > $L/cli && chmod +x $L/cli
export LD_LIBRARY_PATH=$L/o PYTHONPATH=$PWD/python
for d in 64 128; do
  h=$((2048 / d))
  timeout 150 ncu --clock-control none -k regex:fwd_kernel -s 2 -c 1 --set full --import-source yes -f -o $R/fwd-d$d \
    $L/cli run --device cuda --batch 32 --heads $h --head-dim $d --seqlen-q 512 --causal --repeat 2 --warmup 1 > $R/ncu-run-d$d.log 2>&1
  echo "ncu d$d rc=$?"
  ncu --import $R/fwd-d$d.ncu-rep --print-details all > $R/fwd-d$d.txt 2>&1
  ncu --import $R/fwd-d$d.ncu-rep --page source --print-source sass --csv > $R/fwd-d$d-sass.csv 2>/dev/null
  python3 bench/sm90/ncu_stalls.py $R/fwd-d$d-sass.csv 30 > $R/fwd-d$d-stalls.txt 2>&1
  rm -f $R/fwd-d$d.ncu-rep $R/fwd-d$d-sass.csv
  cat > $L/sdpa.py <<PY
import torch, torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel
q = torch.randn(32, $h, 512, $d, device="cuda", dtype=torch.bfloat16)
with sdpa_kernel([SDPBackend.CUDNN_ATTENTION]):
    for _ in range(3): F.scaled_dot_product_attention(q, q, q, is_causal=True)
torch.cuda.synchronize()
PY
  timeout 120 ncu --clock-control none --section LaunchStats --section Occupancy --section SpeedOfLight \
    python3 $L/sdpa.py > $R/cudnn-d$d.txt 2>&1
  echo "cudnn d$d rc=$?"
done
cd $OUT && tar czf r.tgz r && rm -rf r
