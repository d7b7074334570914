#!/bin/bash
# Fourteenth round (docs/BEYOND.md): the when-questions, read once.
set -e
cd /work/main
Q=bench-results/eventq14.json
A="--split confirm --sample conv-26 --sample conv-41 --sample conv-43"
echo "small $(date)"
.venv/bin/nemori bench locomo $Q --model small $A --systems nemori-unbuilt,rag-256,full-context,nemori-unbuilt-b1a2 --out bench-results/event14-small
echo "base $(date)"
.venv/bin/nemori bench locomo $Q --model small --answer-model base $A --systems nemori-unbuilt,rag-256 --out bench-results/event14-base
echo "done $(date)"
