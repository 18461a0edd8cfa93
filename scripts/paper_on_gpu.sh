#!/usr/bin/env bash
# The paper's own model on a GPU lent for minutes (15 of device time in all, its start included; at most
# 10 a command; 8 files of 16 MiB back a command): trained in TF32, packed in bf16 with its metrics, and
# installed here. Every step but the device calls is tested at smoke in CI (tests/test_remote.py).
#
# Here, before the loan (the working tree that travels must stay under 64 MiB; the shipped runs weigh more,
# and the pipeline does not need them there):
#   bash scripts/paper_on_gpu.sh hide
# On the lent machine, one device call each, each right after the last (the machine stays warm 30 s):
#   1. bash scripts/paper_on_gpu.sh train     timeout_s 590   trains from step 0 until 540 s, stops at a checkpoint
#   2. bash scripts/paper_on_gpu.sh finish    timeout_s 590   the rest; packs the record and step 4,000 (5 + 2 files)
#   3. bash scripts/paper_on_gpu.sh pack      timeout_s 120   packs the last checkpoint (5 + 2 files)
# At 17.5 ms a step (an H200, the last loan) the 32,000 steps take 560 s: about 12.5 minutes with the start.
# Here, after it (FILES_2 and FILES_3: the folders the files of calls 2 and 3 came back into):
#   bash scripts/paper_on_gpu.sh restore
#   git rm -r -q runs/reference/paper-08fef206d2   # the same config, shipped with its metrics alone until now
#   python -m matcomp unpack FILES_2 FILES_3 && python -m matcomp derive
set -euo pipefail
cd "$(dirname "$0")/.."
RUN=(--preset paper --set train.precision=tf32 --set train.steps=32000 --device cuda --no-derive)  # book.sizes.PAPER_SCALE

remote() {  # the lent machine: python3 holds PyTorch there; this library runs from the tree, not installed
    PYTHONUNBUFFERED=1 PYTHONPATH=lib python3 -m matcomp remote "${RUN[@]}" --out "$OUT" "$@"
}

case "${1:-}" in
    hide)  # the shipped runs out of the tree that travels, until restore
        git rm -r -q --cached runs/reference
        sed -i 's|^!/runs/reference/$|# !/runs/reference/  (hidden by scripts/paper_on_gpu.sh; restore puts it back)|' .gitignore
        echo "the tree that travels: $(git ls-files | xargs -d '\n' du -cb 2>/dev/null | tail -1 | cut -f1) bytes tracked" ;;
    restore)
        git checkout -- .gitignore
        git reset -q -- runs/reference
        git status --short | head ;;
    train)
        nvidia-smi --query-gpu=name,memory.total --format=csv,noheader
        remote --limit-s 540 ;;
    finish)
        remote --limit-s 540 ;;
    pack)
        remote ;;
    *)
        echo "usage: bash scripts/paper_on_gpu.sh hide | train | finish | pack | restore" >&2
        exit 2 ;;
esac
