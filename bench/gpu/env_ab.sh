#!/usr/bin/env bash
# A/B timing of run-time knobs (environment variables the library reads once
# per process, e.g. FLASHATTN_SM90_SCHEDULE, FLASHATTN_SM90_HD128_BLOCKM):
# each round runs bench_peers.py once per setting, one process each, in turn,
# so that the card's clock and thermal drift fall on every setting alike.
# Compare settings with bench/gpu/ab_summary.py (medians over the rounds,
# each against cuDNN measured in the same process when --impls has it).
#
#   bench/gpu/env_ab.sh OUTDIR ROUNDS SETTING... -- [bench_peers.py options]
#
# A SETTING is a comma-separated list of NAME=VALUE ("-" for none). Each
# process writes OUTDIR/ab-r<round>-s<index>.csv, whose first line names the
# setting. AB_TIMEOUT (seconds, default 300) bounds each process.
set -euo pipefail
[ $# -ge 3 ] || { echo "usage: $0 OUTDIR ROUNDS SETTING... -- [bench_peers.py options]" >&2; exit 2; }
out=$1 rounds=$2
shift 2
settings=()
while [ $# -gt 0 ] && [ "$1" != "--" ]; do settings+=("$1"); shift; done
[ $# -gt 0 ] && shift
mkdir -p "$out"
here=$(cd "$(dirname "$0")" && pwd)
for r in $(seq 1 "$rounds"); do
  for i in "${!settings[@]}"; do
    s=${settings[$i]}
    envs=()
    [ "$s" != "-" ] && IFS=, read -r -a envs <<< "$s"
    f="$out/ab-r$r-s$i.csv"
    echo "== round $r, setting $i: $s" >&2
    { echo "# setting: $s"; env "${envs[@]}" timeout "${AB_TIMEOUT:-300}" python3 "$here/bench_peers.py" "$@"; } > "$f" || echo "setting $i failed (rc $?)" >&2
  done
done
