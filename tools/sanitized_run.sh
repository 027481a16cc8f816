#!/usr/bin/env bash
# tools/sanitized_run.sh SANITIZER BUILD — the sanitizer runs (docs/testing.md):
#
#   address  (`make test-sanitize`): BUILD configured with -DHARRIER_SANITIZE=ON
#            (AddressSanitizer + UBSan, LeakSanitizer at each process's exit); suites from
#            ASAN_SUITES
#   thread   (`make test-tsan`): BUILD configured with -DHARRIER_TSAN=ON; suites from TSAN_SUITES
#
# Runs every unit test (corpus replays included), then the integration suites named (CTest names;
# empty: none) against BUILD/harrier. Every process writes its reports to BUILD/<sanitizer>-reports/
# (the sanitizers' log_path) instead of its stderr, so that a server's report is not lost in a log
# the suite deletes with its folder; the run fails when any report was written (and prints them),
# or when a test fails.
#
# HARRIER_SANITIZER=<sanitizer> is exported for the tests: the few whose assertions rest on glibc
# malloc's behaviour or on uninstrumented timing relax them only then (tests/integration/harness.py).
set -euo pipefail
cd "$(dirname "$0")/.."
sanitizer=${1:?usage: tools/sanitized_run.sh address|thread BUILD}
build=${2:?usage: tools/sanitized_run.sh address|thread BUILD}

reports=$PWD/$build/$sanitizer-reports
rm -rf "$reports"
mkdir -p "$reports"
export HARRIER_SANITIZER=$sanitizer
case $sanitizer in
  address)
    suites=${ASAN_SUITES-integration integration_grpc_wire integration_http2 integration_lifecycle integration_drain integration_generation}
    # quarantine_size_mb=64: freed memory ASan holds back to catch a use after free (256 MiB by
    # default) would count against the floods' +256 MiB RSS bound. LeakSanitizer runs at every
    # process's exit, the server's included (a clean shutdown frees what it made).
    export ASAN_OPTIONS="log_path=$reports/asan detect_leaks=1 quarantine_size_mb=64"
    export LSAN_OPTIONS="suppressions=$PWD/tests/lsan.supp"
    export UBSAN_OPTIONS="log_path=$reports/ubsan print_stacktrace=1 halt_on_error=1"
    ;;
  thread)
    suites=${TSAN_SUITES-integration integration_grpc_wire integration_http2 integration_lifecycle integration_generation integration_drain}
    # history_size=4: deeper per-thread histories, so that the earlier access of a race on a busy
    # I/O thread still has its stack. second_deadlock_stack: both stacks of a lock-order inversion.
    export TSAN_OPTIONS="log_path=$reports/tsan halt_on_error=0 history_size=4 second_deadlock_stack=1 suppressions=$PWD/tests/tsan.supp"
    ;;
  *)
    echo "sanitized_run: unknown sanitizer '$sanitizer' (address or thread)" >&2
    exit 2
    ;;
esac

failed=0
start=$(date +%s)
(cd "$build" && ctest --output-on-failure -L unit -j 2) || failed=1
unit_done=$(date +%s)
if [[ -n $suites ]]; then
  regex="^($(tr -s ' ' '|' <<<"$suites"))\$"
  (cd "$build" && ctest --output-on-failure -R "$regex") || failed=1
fi
echo "$sanitizer: unit tests $((unit_done - start)) s, integration suites ($suites) $(($(date +%s) - unit_done)) s"

shopt -s nullglob
found=("$reports"/*)
if ((${#found[@]})); then
  echo "$sanitizer: ${#found[@]} process(es) reported:" >&2
  for f in "${found[@]}"; do
    echo "==== $f" >&2
    cat "$f" >&2
  done
  exit 1
fi
if ((failed)); then
  echo "$sanitizer: FAILED (a test failed; no sanitizer report)" >&2
  exit 1
fi
echo "$sanitizer: no report"
