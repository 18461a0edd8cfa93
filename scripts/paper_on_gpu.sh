#!/usr/bin/env bash
# The paper's own model on a GPU lent for minutes: 15 minutes of device time in all, the machine's start
# included; at most 10 a command; 8 files of 16 MiB (64 MiB in all) back a command; the machine given back
# about 30 s after a command ends. So each command below is whole by itself (matcomp.remote): it trains
# from step 0 on a bare machine and brings back a verified, installable result, or loses only its minutes.
# Everything but the GPU runs at smoke in CI (tests/test_remote.py); SMOKE=1 runs these commands on a CPU.
#
# Here, before the loan (the shipped runs weigh more than the 64 MiB that travel, and are not needed there):
#   bash scripts/paper_on_gpu.sh hide
# On the lent machine, one device call each (seed S: the first loan 0, the next ones 1 and 2):
#   1. bash scripts/paper_on_gpu.sh run S          timeout_s 590
#      checks and times the engines (~60 s), trains from step 0 with the fastest until 530 s from the command's start,
#      seals the run where it stopped, brings back its record and its last checkpoint in bf16 (7 files + log)
#   2. bash scripts/paper_on_gpu.sh checkpoint S ENGINE 4000    timeout_s 180 (ENGINE: what 1 printed)
#      trains the same run to step 4,000 (the pre-shift model) and brings back that checkpoint (5 files + log);
#      unpack installs it only if its bytes are those the record of 1 holds (deterministic training)
#   Either may run on another loan than the other, on the same kind of GPU.
# Here, after it (RUN_DIR and CHECKPOINT_DIR: the folders the files came back into):
#   bash scripts/paper_on_gpu.sh restore
#   python -m matcomp unpack RUN_DIR CHECKPOINT_DIR && python -m matcomp derive && python -m matcomp card
set -euo pipefail
cd "$(dirname "$0")/.."
RUN=(--preset paper --set train.precision=tf32)  # matcomp.sizes.PAPER_SCALE: the paper's run, 50,000 steps, in TF32
DEVICE=cuda
WALL_S=530    # run: seconds from the command's start to the last checkpoint trained
AFTER_S=45    # run: seconds kept after it (python's start, sealing 51 float32 checkpoints, the bf16 copy, packing)
if [[ -n "${SMOKE:-}" ]]; then  # the same commands on a CPU, in seconds
    RUN=(--preset smoke --set train.precision=tf32); DEVICE=cpu; WALL_S=60; AFTER_S=10
fi

# the lent machine's python3 holds PyTorch; this library runs from the tree, not installed
MATCOMP=(env PYTHONUNBUFFERED=1 PYTHONPATH=lib CUBLAS_WORKSPACE_CONFIG=:4096:8 python3 -m matcomp)

before_any_work() {  # SEED and $OUT checked in a few seconds, before the engine test, the bench or training
    : "${OUT:?set OUT: the folder whose files come back}"
    mkdir -p "$OUT" 2>/dev/null && [[ -w "$OUT" ]] || { echo "OUT=$OUT cannot be made or written: name a folder you can write" >&2; exit 2; }
    env PYTHONPATH=lib python3 -c 'import sys; from matcomp.presets import resolved_config
try: resolved_config(sys.argv[1], {"train.seed": sys.argv[2]})
except ValueError as err: sys.exit(f"SEED: {err}")' "${RUN[1]}" "$1"
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
    run)
        seed="${2:?seed}"; before_any_work "$seed"
        export MATCOMP_RUNS; MATCOMP_RUNS="$(mktemp -d)"  # a store of its own: nothing from another command
        { nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader || true; } | tee "$OUT/log"
        # the graph engine takes the ahead engine's steps (tests/test_training.py; ~20 s, skipped on a CPU)
        timeout 60 env PYTHONPATH=lib python3 -m pytest -o addopts="" -q -p no:cacheprovider tests/test_training.py \
            -k graph_engine_replays 2>&1 | tail -3 | tee -a "$OUT/log" || true
        engine=$(timeout 150 "${MATCOMP[@]}" bench "${RUN[@]}" --device "$DEVICE" --engines --steps 100 --warmup 10 \
            2>&1 | tee -a "$OUT/log" | sed -n 's/^fastest engine: //p') || true
        engine="${engine:-eager}"  # the bench failed or ran out of time: the engine of the last loan
        limit=$((WALL_S - SECONDS))
        echo "engine $engine; training for at most $limit s" | tee -a "$OUT/log"
        "${MATCOMP[@]}" remote "${RUN[@]}" --set "train.seed=$seed" --device "$DEVICE" --engine "$engine" \
            --limit-s "$limit" --out "$OUT" 2>&1 | tee -a "$OUT/log"
        echo "done in $SECONDS s (of $((WALL_S + AFTER_S)) planned)" | tee -a "$OUT/log" ;;
    checkpoint)
        seed="${2:?seed}"; engine="${3:?engine (the run command printed it)}"; step="${4:?step}"
        before_any_work "$seed"
        export MATCOMP_RUNS; MATCOMP_RUNS="$(mktemp -d)"
        "${MATCOMP[@]}" remote "${RUN[@]}" --set "train.seed=$seed" --device "$DEVICE" --engine "$engine" \
            --checkpoint "$step" --out "$OUT" 2>&1 | tee "$OUT/log"
        echo "done in $SECONDS s" | tee -a "$OUT/log" ;;
    *)
        echo "usage: bash scripts/paper_on_gpu.sh hide | run SEED | checkpoint SEED ENGINE STEP | restore" >&2
        exit 2 ;;
esac
