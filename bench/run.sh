#!/usr/bin/env bash
# make bench: the micro-benchmarks, instructions per request (bench/instructions.sh, with
# valgrind), then the shared kit beside Harrier's floor and peers.
#   bench/run.sh BUILD_DIR            everything (the kit takes ~10 minutes)
#   BENCH_KIT=0 bench/run.sh BUILD    micro-benchmarks only
# Results: printed, and the kit's lines in ~/.cache/harrier-bench/logs/results.txt.
set -euo pipefail
build=${1:-build}
here=$(cd "$(dirname "$0")" && pwd)
for b in "$build"/bench/*_bench; do
  [[ -x $b ]] || continue
  echo "== $(basename "$b")"
  "$b" --benchmark_min_time=0.5
done
# User-space instructions per request (the figure that repeats on a noisy machine).
if command -v valgrind >/dev/null; then
  echo "== instructions per request (bench/instructions.sh)"
  bash "$here/instructions.sh" "$build" || echo "instructions.sh failed" >&2
else
  echo "valgrind not installed: instructions per request skipped" >&2
fi
kit=$here/../../shared/bench/compare.sh
# The kit's raw ONNX Runtime loop (raw_ort.cpp) creates its Ort::Env with telemetry on, which
# leaves ~/.cache/Microsoft/DeveloperTools/.onnxruntime/ (a device id and an event database)
# behind; ONNX Runtime honours this variable (checked: nothing written with it).
export ORT_DISABLE_TELEMETRY=1
if [[ ${BENCH_KIT:-1} == 1 ]]; then
  if [[ -x $kit || -f $kit ]]; then
    echo "== shared kit: $kit --harrier $build/harrier ${BENCH_ARGS:-}"
    # shellcheck disable=SC2086
    bash "$kit" --harrier "$build/harrier" ${BENCH_ARGS:-}
  else
    echo "shared kit not found at $kit; skipped" >&2
  fi
fi
