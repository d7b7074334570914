#!/usr/bin/env bash
# Appending ingests on a built memory: what preparing the core context costs at the end of each.
# Six rounds of four new messages each, ingested into a copy of MEMORY.db (user "bench", as
# `nemori bench` builds it), one `nemori ingest --json` line recorded per round.
#
#   scripts/bench_core_appends.sh NEMORI_BIN MEMORY.db OUT.jsonl
#
# docs/CORE.md's figures: MEMORY.db is whole conv-30's nemori memory from `make bench-core`
# (bench-results/core-conv-30-all-small/memories/conv-30/nemori-*.db); the baseline is the same
# script run with PYTHONPATH set to a checkout of the commit before the change.
set -euo pipefail
NEMORI=$1; MEMORY=$2; OUT=$3
[ -x "$NEMORI" ] || { echo "bench_core_appends: no nemori at $NEMORI" >&2; exit 2; }
[ -f "$MEMORY" ] || { echo "bench_core_appends: no memory file $MEMORY" >&2; exit 2; }
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cp "$MEMORY" "$work/m.db"
: > "$OUT"
for round in 1 2 3 4 5 6; do
  f=$work/r$round.jsonl; : > "$f"
  for i in 1 2 3 4; do
    speaker=$([ $((i % 2)) = 1 ] && echo Jon || echo Gina)
    printf '{"id": "app-%s-%s", "speaker": "%s", "content": "Round %s, line %s: I tried a new salsa class downtown and met the teacher, who runs a studio near the river.", "timestamp": "2023-08-%02dT1%s:00:00"}\n' \
      "$round" "$i" "$speaker" "$round" "$i" $((round + 1)) "$i" >> "$f"
  done
  start=$(date +%s.%N)
  "$NEMORI" ingest "$f" --db "$work/m.db" --user bench --json > "$work/out$round.json"
  end=$(date +%s.%N)
  python3 -c "
import json, sys
r = json.load(open(sys.argv[1]))
print(json.dumps({'round': int(sys.argv[2]), 'wall_s': round(float(sys.argv[4]) - float(sys.argv[3]), 1), 'ingest_s': r['seconds'], 'core': r.get('core')}))
" "$work/out$round.json" "$round" "$start" "$end" | tee -a "$OUT"
done
