#!/bin/bash
# Sixteenth round (docs/BEYOND.md): the tuning split, then the confirmation by the rule written before the run.
# Needs the fifteenth round's four built memories (docs/bench/tune15-locomo/build15.sh, about 73 min of two cores).
set -e
cd "$(dirname "$0")/../../.."
DB=nemori-native-prediction-int-narrative-similarity.db
for s in conv-30 conv-26 conv-41 conv-43; do
  [ -f bench-results/build15-$s/memories/$s/$DB ] || { echo "r16.sh: $s is not built; run docs/bench/tune15-locomo/build15.sh first" >&2; exit 2; }
done
place() { # sample folder: the one built memory of that sample, copied in
  mkdir -p "$2/memories/$1"
  for f in bench-results/build15-$1/memories/$1/$DB*; do cp "$f" "$2/memories/$1/"; done
}
N=.venv/bin/nemori
S=nemori,nemori-s450-heads
T="--split tune --sample conv-30"
place conv-30 bench-results/tune16-locomo; place conv-30 bench-results/tune16-obs
echo "tune locomo $(date)"
$N bench locomo ../shared/data/locomo/locomo-dev.json --model small $T --systems $S --out bench-results/tune16-locomo
echo "tune obs $(date)"
$N bench locomo bench-results/obsq12.json --model small $T --systems $S --out bench-results/tune16-obs
.venv/bin/python scripts/pooled.py bench-results/tune16-locomo bench-results/tune16-obs --pair nemori-s450-heads:nemori --json > bench-results/tune16-pooled.json
GO=$(.venv/bin/python -c "import json; print(int(json.load(open('bench-results/tune16-pooled.json'))[0]['mean_difference'] > 0.01))")
echo "tuning passes: $GO $(date)"
C="--split confirm --sample conv-26 --sample conv-41 --sample conv-43"
for s in conv-26 conv-41 conv-43; do place $s bench-results/confirm16-event; place $s bench-results/confirm16-obs; done
echo "confirm event $(date)"
if [ "$GO" = 1 ]; then
  $N bench locomo bench-results/eventq14.json --model small $C --systems $S,rag-256 --out bench-results/confirm16-event
  echo "confirm obs $(date)"
  $N bench locomo bench-results/obsq12.json --model small $C --systems $S --out bench-results/confirm16-obs
else
  $N bench locomo bench-results/eventq14.json --model small $C --systems $S --out bench-results/confirm16-event
fi
echo "done $(date)"
