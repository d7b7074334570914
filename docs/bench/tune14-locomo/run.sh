#!/bin/bash
# Fourteenth round (docs/BEYOND.md): the tuning split, base reading 450 against 800 tokens.
set -e
cd /work/main
S=nemori-unbuilt,nemori-unbuilt-s800
echo "tune locomo $(date)"
.venv/bin/nemori bench locomo ../shared/data/locomo/locomo-dev.json --model small --answer-model base --split tune --sample conv-30 --systems $S --out bench-results/tune14-locomo
echo "tune obs $(date)"
.venv/bin/nemori bench locomo bench-results/obsq12.json --model small --answer-model base --split tune --sample conv-30 --systems $S --out bench-results/tune14-obs
echo "done $(date)"
