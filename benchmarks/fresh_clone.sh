#!/usr/bin/env bash
# The README's two commands on a fresh clone, timed phase by phase: what a new reader waits for, and what
# the README's "How long" paragraph reports. Prints each phase's seconds, each chapter's execution in the
# build, the tests skipped and why, and the ten slowest tests; asserts nothing (a benchmark, not a test).
#
#   bash benchmarks/fresh_clone.sh            # this repository's HEAD, in a new virtual environment
#   bash benchmarks/fresh_clone.sh REV        # an earlier commit, to compare on the same machine and day
#   SLOWEST=150 bash benchmarks/fresh_clone.sh  # list the 150 slowest tests, not 10, to see where the time goes
#
# Run it with nothing else on the machine: the build and the tests use every core.
set -euo pipefail
repo="$(cd "$(dirname "$0")/.." && pwd)"
if [[ $# -gt 1 ]]; then
    echo "usage: bash benchmarks/fresh_clone.sh [REV]: one revision at most; got $#" >&2
    exit 2
fi
if [[ -n "${1:-}" ]] && ! git -C "$repo" rev-parse -q --verify "$1^{commit}" > /dev/null; then
    echo "error: $1 is not a commit of $repo (git log --oneline lists them); nothing was cloned" >&2
    exit 2
fi
slowest="${SLOWEST:-10}"
if ! [[ "$slowest" =~ ^[1-9][0-9]*$ ]]; then
    echo "error: SLOWEST must be a whole number of tests (1 or more); got '$slowest'" >&2
    exit 2
fi
work="$(mktemp -d)"
# on any exit the clone, its environment and its run store (gigabytes) go; the logs stay, if any were written
trap 'cd /; rm -rf "$work/fresh" "$work/store"; rmdir "$work" 2> /dev/null || true' EXIT
if [[ -n "${1:-}" ]]; then
    git clone -q --no-checkout "file://$repo" "$work/fresh"  # two commands: set -e does not stop inside an && list
    git -C "$work/fresh" checkout -q "$1"
else
    git clone -q --depth 1 "file://$repo" "$work/fresh"  # shallow: the shipped runs' history stays behind
fi
cd "$work/fresh"
echo "commit $(git rev-parse --short HEAD), $(date -u +%F), $(nproc) cores, $(python -c 'import platform; print(platform.processor() or platform.machine())')"
python -m venv .venv
. .venv/bin/activate
export MATCOMP_RUNS="$work/store"  # the tests' run store, apart from any other

start=$SECONDS
pip install -q --disable-pip-version-check -r requirements.txt > "$work/pip.log" 2>&1
pip_s=$((SECONDS - start))

start=$SECONDS
jupyter-book build -W --keep-going . > "$work/build.log" 2>&1 || echo "build failed: $work/build.log"
build_s=$((SECONDS - start))

start=$SECONDS
python -m pytest --durations="$slowest" -rs > "$work/pytest.log" 2>&1 || echo "pytest failed: $work/pytest.log"
pytest_s=$((SECONDS - start))

echo
echo "| phase | seconds |"
echo "|---|---|"
echo "| pip install -r requirements.txt | $pip_s |"
echo "| jupyter-book build -W --keep-going . | $build_s |"
echo "| python -m pytest ($(grep -E '[0-9]+ (passed|failed)' "$work/pytest.log" | tail -1 | sed 's/=//g; s/^ *//; s/ *$//')) | $pytest_s |"
echo "| the two commands | $((pip_s + build_s + pytest_s)) |"
echo
echo "each chapter's execution in the build, from its cache (seconds; several at a time: matcomp.book.build.parallel_build):"
python -c '
from jupyter_cache import get_cache
for r in get_cache("_build/.jupyter_cache").list_cache_records():
    print(round(r.data.get("execution_seconds", float("nan")), 1), r.uri.split("/fresh/")[-1])
' | sort -rn | sed 's/^/  /'
echo
# a machine without Debian's chromium skips the browser tests (the JupyterLab run, the built pages' check): their
# minutes are then missing from the tests' time, so the skips are named beside it
echo "tests skipped, and why:"
grep '^SKIPPED' "$work/pytest.log" | sed 's/^/  /' || echo "  none"
echo
echo "the $slowest slowest tests:"
sed -n "/slowest $slowest durations/,/^\$/p" "$work/pytest.log" | sed -n "2,$((slowest + 1))p" | sed 's/^/  /'
echo "(logs in $work; the clone is removed)"
