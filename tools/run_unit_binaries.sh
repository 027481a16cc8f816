#!/usr/bin/env bash
# Every GoogleTest binary of BUILD run once whole, each test after the ones before it in one
# process. CTest runs each test in a process of its own, which hides what one test leaves behind
# for the next: a resumed stream that outlived its handler wrote through a freed access log and
# killed the next test in malloc, 2 runs in 6, and never under CTest (session 29).
# Usage: tools/run_unit_binaries.sh BUILD
set -euo pipefail
build=${1:?usage: $0 BUILD}
failed=0
for binary in "$build"/tests/*_tests; do
  [ -x "$binary" ] || continue
  log=$(mktemp)
  if timeout 600 "$binary" --gtest_brief=1 > "$log" 2>&1; then
    echo "ok   $(basename "$binary")"
  else
    echo "FAIL $(basename "$binary") (exit $?):"
    tail -n 40 "$log"
    failed=1
  fi
  rm -f "$log"
done
exit $failed
