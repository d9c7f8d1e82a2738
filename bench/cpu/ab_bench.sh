#!/usr/bin/env bash
# A/B of two bench_cpu binaries (e.g. one built at the base commit, one with a
# change), alternated round by round so that both see the same host load:
#   bench/cpu/ab_bench.sh OUT.csv BASE_BENCH NEW_BENCH [--rounds 5] [bench_cpu args]
# e.g. ... --hdims 128 --seqlens 2048 --dtypes fp32 --causal 0,1 --repeat 3 --no-backward
# OUT.csv: bench_cpu's flashattn rows prefixed with build (base/new) and round;
# then the per-shape rounds, medians and bests (ab_summary.py, which isa_ab.sh uses too). A shared 2-core
# host moves by +-20% between rounds: read the medians and the bests together.
set -euo pipefail
out=$1 base=$2 new=$3
shift 3
rounds=5
args=()
while [ $# -gt 0 ]; do
  case "$1" in
    --rounds) rounds=$2; shift 2 ;;
    *) args+=("$1"); shift ;;
  esac
done
export OMP_NUM_THREADS=${OMP_NUM_THREADS:-$(nproc)}
echo "# ab_bench.sh $base $new --rounds $rounds ${args[*]}; $OMP_NUM_THREADS threads; $(date -u +%FT%TZ)" > "$out"
for r in $(seq "$rounds"); do
  for b in base new; do
    bin=$base; [ $b = new ] && bin=$new
    "$bin" "${args[@]}" --no-naive --no-ceilings 2>/dev/null | grep '^flashattn,' | sed "s/^/$b,$r,/" >> "$out"
  done
  echo "round $r of $rounds done" >&2
done
python3 "$(dirname "$0")/ab_summary.py" "$out"
