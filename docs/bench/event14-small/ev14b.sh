#!/bin/bash
# Fourteenth round: the when-questions inside the haystacks (after ev14.sh).
cd /work/main
while pgrep -f ev14.sh > /dev/null; do sleep 10; done
echo "haystacks $(date)"
for pair in "conv-26 conv-30,conv-41,conv-43" "conv-41 conv-26,conv-30,conv-43" "conv-43 conv-26,conv-30,conv-41"; do
  set -- $pair
  .venv/bin/nemori bench locomo bench-results/eventq14-all.json --model small --split confirm \
    --sample "$1" --haystack "$2" --systems nemori-unbuilt,rag-256 --out "bench-results/event14-hay-$1"
  echo "$1 $(date)"
done
echo "done $(date)"
