#!/usr/bin/env bash
# The paper's own model on a GPU lent for minutes: 15 minutes of device time in all, the machine's start
# included; at most 10 a command; 8 files of 16 MiB (64 MiB in all) back a command; the machine given back
# about 30 s after a command ends. So each command below is whole by itself (matcomp.remote): it trains
# from step 0 on a bare machine and brings back a verified, installable result, or loses only its minutes.
# Everything but the GPU runs at smoke in CI (tests/test_remote.py); SMOKE=1 runs these commands on a CPU.
#
# Here, before the loan (the shipped runs weigh more than the 64 MiB that travel, and are not needed there):
#   bash scripts/paper_on_gpu.sh hide
# On the lent machine (15 minutes in all: its start, 1-2 minutes, then these two), one device call each (seed S: 0
# again if the last loan's step reached 10.6 ms, so 50,000 steps fit a command; else the next seed, 1 then 2):
#   1. bash scripts/paper_on_gpu.sh run S          timeout_s 600
#      the bench (at most BENCH_S, 90 s): trains the run twice for 200 steps by each combination of levers
#      (matcomp.levers: engine, torch.compile, attention mask, cuBLAS workspace), refuses one whose two trainings
#      differ by a byte and prints the fastest of the rest (`fastest levers: OPTIONS`); then trains from step 0
#      with those options until 530 s from the command's start, writing only checkpoint 4,000 and the last,
#      seals the run where it stopped, brings back its record and its last checkpoint in bf16 (7 files + log)
#   2. bash scripts/paper_on_gpu.sh checkpoint S "LEVERS" 4000    timeout_s 180 (LEVERS: the options 1 printed
#      on its `levers:` line, quoted as one argument)
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
AFTER_S=45    # run: seconds kept after it (python's start, sealing the float32 checkpoints, the bf16 copy, packing)
BENCH_S=90    # run: the bench's budget, all its trainings together
BENCH=(--steps 190 --warmup 10)  # each trial: 200 steps from step 0, the last 190 timed
WRITE=4000    # the only checkpoint written besides the last: the pre-shift model that command 2 brings back
FALLBACK="--engine graph --attention-mask none --cublas-workspace :4096:8"  # the last loan's, if the bench fails
if [[ -n "${SMOKE:-}" ]]; then  # the same commands on a CPU, in seconds
    RUN=(--preset smoke --set train.precision=tf32); DEVICE=cpu; WALL_S=90; AFTER_S=10; BENCH_S=40
    BENCH=(--steps 15 --warmup 5); WRITE=100; FALLBACK="--engine eager --attention-mask none --cublas-workspace :4096:8"
fi

# the lent machine's python3 holds PyTorch; this library runs from the tree, not installed
MATCOMP=(env PYTHONUNBUFFERED=1 PYTHONPATH=lib python3 -m matcomp)

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
        levers=$(timeout $((BENCH_S + 10)) "${MATCOMP[@]}" bench "${RUN[@]}" --device "$DEVICE" --levers \
            --budget-s "$BENCH_S" "${BENCH[@]}" 2>&1 | tee -a "$OUT/log" | sed -n 's/^fastest levers: //p') || true
        levers="${levers:-$FALLBACK}"  # the bench failed or ran out of time
        limit=$((WALL_S - SECONDS))
        echo "levers: $levers" | tee -a "$OUT/log"
        echo "training for at most $limit s" | tee -a "$OUT/log"
        # shellcheck disable=SC2086  # the levers are options, one word each
        "${MATCOMP[@]}" remote "${RUN[@]}" --set "train.seed=$seed" --device "$DEVICE" $levers --write-steps "$WRITE" \
            --limit-s "$limit" --out "$OUT" 2>&1 | tee -a "$OUT/log"
        echo "done in $SECONDS s (of $((WALL_S + AFTER_S)) planned)" | tee -a "$OUT/log" ;;
    checkpoint)
        seed="${2:?seed}"; levers="${3:?levers (the run command printed them: levers: ...)}"; step="${4:?step}"
        before_any_work "$seed"
        export MATCOMP_RUNS; MATCOMP_RUNS="$(mktemp -d)"
        # shellcheck disable=SC2086
        "${MATCOMP[@]}" remote "${RUN[@]}" --set "train.seed=$seed" --device "$DEVICE" $levers --write-steps "$step" \
            --checkpoint "$step" --out "$OUT" 2>&1 | tee "$OUT/log"
        echo "done in $SECONDS s" | tee -a "$OUT/log" ;;
    *)
        echo "usage: bash scripts/paper_on_gpu.sh hide | run SEED | checkpoint SEED \"LEVERS\" STEP | restore" >&2
        exit 2 ;;
esac
