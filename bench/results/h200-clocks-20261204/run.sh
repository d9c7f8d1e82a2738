#!/usr/bin/env bash
# Why the grid reads 5-10% under the CLI at head dim 128, 8k-16k: the SM clock, power and the
# throttle reasons sampled every 200 ms while the forward (16k tokens, 16 heads, non-causal, bf16)
# runs back to back for ~40 s, then idle for 5 s, then the same for 20 s.
set -u
mkdir -p /tmp/w && xz -dc build-lead/fp8/lib.so.xz > /tmp/w/libflashattn.so.0 && xz -dc build-lead/clk/cli.xz > /tmp/w/flashattn && chmod +x /tmp/w/flashattn
export LD_LIBRARY_PATH=/tmp/w
nvidia-smi --query-gpu=name,driver_version,power.limit,power.max_limit,clocks.max.sm,clocks.applications.graphics --format=csv
Q=timestamp,clocks.sm,clocks.mem,power.draw,temperature.gpu,clocks_event_reasons.active,clocks_event_reasons.sw_power_cap,clocks_event_reasons.hw_slowdown,clocks_event_reasons.sw_thermal_slowdown,clocks_event_reasons.hw_power_brake_slowdown
nvidia-smi --query-gpu=$Q --format=csv > /dev/null 2>&1 || Q=timestamp,clocks.sm,clocks.mem,power.draw,temperature.gpu
echo "fields: $Q"
nvidia-smi --query-gpu=$Q --format=csv,noheader -lms 200 > $OUT/smi.csv &
SMI=$!
sleep 2
/tmp/w/flashattn run --device cuda --heads 16 --seqlen-q 16384 --head-dim 128 --dtype bf16 --repeat 11000 2>&1 | grep -E "^forward" > $OUT/cli-long.log
sleep 5
/tmp/w/flashattn run --device cuda --heads 16 --seqlen-q 16384 --head-dim 128 --dtype bf16 --repeat 5500 2>&1 | grep -E "^forward" > $OUT/cli-short.log
sleep 2
kill $SMI
cat $OUT/cli-long.log $OUT/cli-short.log
python3 - "$OUT/smi.csv" <<'PY'
import sys
rows=[l.strip().split(', ') for l in open(sys.argv[1]) if l.strip()]
print(len(rows), "samples")
for i in range(0, len(rows), 10):
    r = rows[i]; print(" | ".join(r[1:]))
PY
