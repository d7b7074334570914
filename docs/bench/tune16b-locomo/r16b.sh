#!/bin/bash
# Sixteenth round, second question (docs/BEYOND.md): `base` builds conv-30; `small` reads its episodes (nemori-s450-ep3).
set -e
cd "$(dirname "$0")/../../.."
while pgrep -f "pytest" > /dev/null; do sleep 20; done  # never two model processes at once: after the suite
N=.venv/bin/nemori
DATA=../shared/data/locomo/locomo-dev.json
DB=nemori-native-prediction-int-narrative.db  # base partitions with the model: no "-similarity" in its build key
T="--split tune --sample conv-30"
echo "build $(date)"
$N bench locomo $DATA --model base $T --questions 1 --systems nemori --out bench-results/build16b-conv-30
[ -f bench-results/build16b-conv-30/memories/conv-30/$DB ] || { echo "r16b.sh: no built file for conv-30" >&2; exit 2; }
for out in tune16b-locomo tune16b-obs; do
  mkdir -p bench-results/$out/memories/conv-30
  cp bench-results/build16b-conv-30/memories/conv-30/$DB* bench-results/$out/memories/conv-30/
done
echo "tune locomo $(date)"
$N bench locomo $DATA --model base --answer-model small $T --systems nemori-s450-ep3 --out bench-results/tune16b-locomo
echo "tune obs $(date)"
$N bench locomo bench-results/obsq12.json --model base --answer-model small $T --systems nemori-s450-ep3 --out bench-results/tune16b-obs
echo "candidate done $(date)"
# The check, if time is left: the shipped road over the same build (expected: the same answers as without it).
$N bench locomo $DATA --model base --answer-model small $T --systems nemori-s450-ep3,nemori --out bench-results/tune16b-locomo
$N bench locomo bench-results/obsq12.json --model base --answer-model small $T --systems nemori-s450-ep3,nemori --out bench-results/tune16b-obs
echo "done $(date)"
