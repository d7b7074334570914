#!/bin/bash
# Fourteenth round: the when-questions inside the haystacks, read by base (after the suite and make demo).
cd /work/main
echo "haystacks base $(date)"
for pair in "conv-26 conv-30,conv-41,conv-43" "conv-41 conv-26,conv-30,conv-43" "conv-43 conv-26,conv-30,conv-41"; do
  set -- $pair
  .venv/bin/nemori bench locomo bench-results/eventq14-all.json --model small --answer-model base --split confirm \
    --sample "$1" --haystack "$2" --systems nemori-unbuilt,rag-256 --out "bench-results/event14-hay-base-$1"
  echo "$1 $(date)"
done
echo "done $(date)"
