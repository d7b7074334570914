#!/bin/bash
# Fifteenth round (docs/BEYOND.md): build the four dev conversations with `small` (one question each, to make the memory).
set -e
cd /work/main
for s in conv-30 conv-26 conv-41 conv-43; do
  sp=confirm; [ $s = conv-30 ] && sp=tune
  echo "build $s $(date)"
  .venv/bin/nemori bench locomo ../shared/data/locomo/locomo-dev.json --model small --split $sp --sample $s --questions 1 --systems nemori --out bench-results/build15-$s
done
echo "done $(date)"
