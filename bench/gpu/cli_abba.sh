#!/usr/bin/env bash
# A/B timing of two run-time settings by the flashattn CLI, in ABBA order: round r runs A then B
# when r is odd, B then A when even, so that a process's place in a round (the card's clock and
# power state after the previous process) falls on both settings alike. One process per
# (round, shape, setting); the CLI's median of --repeat calls. Prints per shape the median over
# the rounds of each setting and B / A.
#
#   bench/gpu/cli_abba.sh OUT.csv ROUNDS SETTING_A SETTING_B SHAPE...
#
# A SETTING is a comma-separated list of NAME=VALUE ("-" for none); a SHAPE is the CLI's `run`
# arguments for one shape, quoted, e.g. "--head-dim 64 --seqlen-q 512 --batch 32 --heads 32
# --causal". FLASHATTN_CLI names the CLI (default build/tools/flashattn); CLI_ARGS (default
# "--device cuda --dtype bf16 --repeat 200 --warmup 5") go before each shape's.
set -euo pipefail
[ $# -ge 5 ] || { echo "usage: $0 OUT.csv ROUNDS SETTING_A SETTING_B SHAPE..." >&2; exit 2; }
out=$1 rounds=$2 a=$3 b=$4
shift 4
cli=${FLASHATTN_CLI:-build/tools/flashattn}
common=${CLI_ARGS:---device cuda --dtype bf16 --repeat 200 --warmup 5}
run() {  # setting shape -> median ms
  local envs=()
  [ "$1" != "-" ] && IFS=, read -r -a envs <<< "$1"
  # shellcheck disable=SC2086
  env "${envs[@]}" timeout 60 "$cli" run $common $2 2>&1 | awk '/^forward/ {print $3; exit}'
}
echo "round,setting,shape,median_ms" > "$out"
for r in $(seq 1 "$rounds"); do
  for shape in "$@"; do
    if [ $((r % 2)) = 1 ]; then order="A B"; else order="B A"; fi
    for s in $order; do
      [ $s = A ] && setting=$a || setting=$b
      echo "$r,$s,\"$shape\",$(run "$setting" "$shape")" >> "$out"
    done
  done
  echo "round $r done" >&2
done
python3 - "$out" "$a" "$b" <<'PY'
import csv, statistics, sys
rows = list(csv.DictReader(open(sys.argv[1])))
print(f"A = {sys.argv[2]}, B = {sys.argv[3]}; median ms over rounds (min-max)")
for shape in dict.fromkeys(r["shape"] for r in rows):
    v = {s: [float(r["median_ms"]) for r in rows if r["shape"] == shape and r["setting"] == s and r["median_ms"]]
         for s in "AB"}
    if v["A"] and v["B"]:
        ma, mb = statistics.median(v["A"]), statistics.median(v["B"])
        print(f"{shape}: A {ma:.4f} ({min(v['A']):.4f}-{max(v['A']):.4f})  B {mb:.4f} "
              f"({min(v['B']):.4f}-{max(v['B']):.4f})  B/A {mb / ma:.3f}")
PY
