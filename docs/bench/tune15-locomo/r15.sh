#!/bin/bash
# Fifteenth round (docs/BEYOND.md): after the builds, the tuning split, then the confirmation by the rule written before.
set -e
cd /work/main
# Run after build15.sh; where its output went to bench-results/build15.log (as here), wait for its last line.
while [ -f bench-results/build15.log ] && ! grep -q '^done' bench-results/build15.log; do sleep 30; done
for s in conv-30 conv-26 conv-41 conv-43; do
  [ -f bench-results/build15-$s/memories/$s/nemori-native-prediction-int-narrative-similarity.db ] || { echo "r15.sh: conv $s is not built; run build15.sh first" >&2; exit 2; }
done
DB=nemori-native-prediction-int-narrative-similarity.db
place() { # sample folder: the one built memory of that sample, copied in
  mkdir -p "$2/memories/$1"
  for f in bench-results/build15-$1/memories/$1/$DB*; do cp "$f" "$2/memories/$1/"; done
}
N=.venv/bin/nemori
S=nemori,nemori-s450-ep3
T="--split tune --sample conv-30"
place conv-30 bench-results/tune15-locomo; place conv-30 bench-results/tune15-obs
echo "tune locomo $(date)"
$N bench locomo ../shared/data/locomo/locomo-dev.json --model small $T --systems $S --out bench-results/tune15-locomo
echo "tune obs $(date)"
$N bench locomo bench-results/obsq12.json --model small $T --systems $S --out bench-results/tune15-obs
.venv/bin/python scripts/pooled.py bench-results/tune15-locomo bench-results/tune15-obs --pair nemori-s450-ep3:nemori --json > bench-results/tune15-pooled.json
GO=$(.venv/bin/python -c "import json; print(int(json.load(open('bench-results/tune15-pooled.json'))[0]['mean_difference'] > 0.01))")
echo "tuning passes: $GO $(date)"
C="--split confirm --sample conv-26 --sample conv-41 --sample conv-43"
for s in conv-26 conv-41 conv-43; do place $s bench-results/confirm15-event; place $s bench-results/confirm15-obs; done
echo "confirm event $(date)"
$N bench locomo bench-results/eventq14.json --model small $C --systems $S,rag-256 --out bench-results/confirm15-event
if [ "$GO" = 1 ]; then
  echo "confirm obs $(date)"
  $N bench locomo bench-results/obsq12.json --model small $C --systems $S --out bench-results/confirm15-obs
fi
echo "done $(date)"
