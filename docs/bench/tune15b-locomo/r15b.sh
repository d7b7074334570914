#!/bin/bash
# Fifteenth round (docs/BEYOND.md): base reads small's episodes, conv-30's 135 tuning questions. Waits for the suite.
set -e
cd /work/main
while pgrep -f "pytest -q --durations" > /dev/null; do sleep 20; done
DB=nemori-native-prediction-int-narrative-similarity.db
for d in tune15b-locomo tune15b-obs; do mkdir -p bench-results/$d/memories/conv-30; cp bench-results/build15-conv-30/memories/conv-30/$DB* bench-results/$d/memories/conv-30/; done
N=.venv/bin/nemori
A="--model small --answer-model base --split tune --sample conv-30 --systems nemori,nemori-s450-ep3"
echo "base locomo $(date)"
$N bench locomo ../shared/data/locomo/locomo-dev.json $A --out bench-results/tune15b-locomo
echo "base obs $(date)"
$N bench locomo bench-results/obsq12.json $A --out bench-results/tune15b-obs
echo "done $(date)"
