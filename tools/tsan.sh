#!/usr/bin/env bash
# tools/tsan.sh BUILD — the ThreadSanitizer run (`make test-tsan`, docs/testing.md). BUILD is a
# build configured with -DHARRIER_TSAN=ON. Runs every unit test, then the integration suites that
# drive the server's threads hardest (TSAN_SUITES, CTest names) against BUILD/harrier. Every
# process writes its reports to BUILD/tsan-reports/ (TSAN_OPTIONS' log_path) instead of its
# stderr, so that a server's report is not lost in a log the suite deletes; the run fails when
# any report was written (and prints them), or when a test fails.
set -euo pipefail
cd "$(dirname "$0")/.."
build=${1:?usage: tools/tsan.sh BUILD}
suites=${TSAN_SUITES:-integration integration_grpc_wire integration_http2 integration_lifecycle integration_generation integration_drain}

reports=$PWD/$build/tsan-reports
rm -rf "$reports"
mkdir -p "$reports"
# history_size=4: deeper per-thread histories, so that the earlier access of a race on a busy
# I/O thread still has its stack. second_deadlock_stack: both stacks of a lock-order inversion.
# HARRIER_TSAN: integration tests of glibc malloc's behaviour (memory kept and returned after
# reloads) skip themselves; TSan has its own allocator.
export HARRIER_TSAN=1
export TSAN_OPTIONS="log_path=$reports/tsan halt_on_error=0 history_size=4 second_deadlock_stack=1 suppressions=$PWD/tests/tsan.supp"

failed=0
start=$(date +%s)
(cd "$build" && ctest --output-on-failure -L unit -j 2) || failed=1
unit_done=$(date +%s)
regex="^($(tr ' ' '|' <<<"$suites"))\$"
(cd "$build" && ctest --output-on-failure -R "$regex") || failed=1
echo "tsan: unit tests $((unit_done - start)) s, integration suites $(($(date +%s) - unit_done)) s"

shopt -s nullglob
found=("$reports"/tsan.*)
if ((${#found[@]})); then
  echo "tsan: ${#found[@]} process(es) reported:" >&2
  for f in "${found[@]}"; do
    echo "==== $f" >&2
    cat "$f" >&2
  done
  exit 1
fi
if ((failed)); then
  echo "tsan: FAILED (a test failed; no ThreadSanitizer report)" >&2
  exit 1
fi
echo "tsan: no report"
