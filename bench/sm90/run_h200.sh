#!/usr/bin/env bash
# One-shot run of the sm90 forward on an H200: correctness checks, memcheck and
# synccheck on the quick checks, then the benchmark grid.
#   bench/sm90/run_h200.sh [BUILD_DIR=build-sm90] [OUT_DIR=bench/sm90/results]
# Rebuilds only if BUILD_DIR/bench_sm90 is missing (cmake + ninja + nvcc 13).
set -u
BUILD=${1:-build-sm90}
OUTD=${2:-bench/sm90/results}
mkdir -p "$OUTD"
if [ ! -x "$BUILD/bench_sm90" ]; then
  cmake -S bench/sm90 -B "$BUILD" -G Ninja -DCMAKE_BUILD_TYPE=Release && cmake --build "$BUILD" || exit 2
fi
stamp=$(date -u +%Y%m%dT%H%M%SZ)
commit=$(git rev-parse --short HEAD 2>/dev/null || echo unknown)
nvidia-smi --query-gpu=name,driver_version,clocks.sm,power.draw,temperature.gpu --format=csv \
  | tee "$OUTD/h200_${stamp}_device.txt"
echo "commit $commit" >> "$OUTD/h200_${stamp}_device.txt"
"$BUILD/bench_sm90" --check > "$OUTD/h200_${stamp}_check.txt" 2>&1
echo "check rc=$?" | tee -a "$OUTD/h200_${stamp}_check.txt"
grep -E "FAIL|check:" "$OUTD/h200_${stamp}_check.txt"
for tool in memcheck synccheck; do
  compute-sanitizer --tool $tool "$BUILD/bench_sm90" --check --quick > "$OUTD/h200_${stamp}_$tool.txt" 2>&1
  echo "$tool rc=$? $(grep 'ERROR SUMMARY' "$OUTD/h200_${stamp}_$tool.txt")"
done
"$BUILD/bench_sm90" --bench --tag "flashattn-sm90@$commit" --csv "$OUTD/h200_${stamp}_bench.csv"
