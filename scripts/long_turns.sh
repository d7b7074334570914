#!/usr/bin/env bash
# What clipping long turns saves, and what it costs in answers (docs/EXPORTS.md):
# the same slice of a generated ChatGPT export ingested twice with the same model,
# once as nemori reads it (400 characters of a message) and once read whole
# (scripts/read_whole.py), then the same questions asked of both.
#   bash scripts/long_turns.sh [MODEL] [OUT_DIR]
set -euo pipefail
MODEL=${1:-tiny}
OUT=${2:-/tmp/long-turns}
PY=${PY:-.venv/bin/python}
mkdir -p "$OUT"
[ -f "$OUT/conversations.json" ] || $PY scripts/make_chatgpt_export.py "$OUT/conversations.json"
SLICE="--since 2023-07-01 --until 2023-07-09"
for how in clipped whole; do
  rm -f "$OUT/$how.db"*
  runner="-m nemori_cli"; [ "$how" = whole ] && runner="scripts/read_whole.py"
  # read whole, a small model's context can overflow: that stops the ingest (exit 3, the rest pending), and is a result too
  $PY $runner ingest "$OUT/conversations.json" $SLICE --db "$OUT/$how.db" --model "$MODEL" --json > "$OUT/$how-ingest.json" || echo "$how: ingest stopped (exit $?)"
done
while IFS='|' read -r question expected; do
  for how in clipped whole; do
    answer=$($PY -m nemori_cli ask "$question" --db "$OUT/$how.db" --model "$MODEL" --json < /dev/null | $PY -c "import json,sys; print(json.load(sys.stdin)['answer'])")
    hit=no; echo "$answer" | grep -qiE "$expected" && hit=yes
    printf '%s\t%s\t%s\t%s\n' "$how" "$hit" "$question" "$answer"
  done
done > "$OUT/answers.tsv" <<'Q'
Where is the user moving to?|Edinburgh
Which city did the user live in before the move?|Manchester
How old is the user's sister Jo turning?|30|thirty
What does Jo like?|climb|film
How long has the user been doing Duolingo Spanish?|three months|3 months
Q
cat "$OUT/answers.tsv"
for how in clipped whole; do
  $PY -m nemori_cli stats --db "$OUT/$how.db" --json | $PY -c "import json,sys; d=json.load(sys.stdin); print('$how', d['counts'], [(s['stage'], s['calls'], s['prompt_tokens'], s['seconds']) for s in d['stages']])"
done
