#!/usr/bin/env bash
# Builds the libFuzzer targets (tests/fuzz; docs/fuzzing.md) with clang, ASan and UBSan, and runs
# each for SECONDS, starting from its committed seeds.
#
#   tools/fuzz.sh [SECONDS] [TARGET...]   SECONDS per target (default 60); TARGET: a name from
#                                         the table below (default: all of them)
#
#   JOBS=N       compile jobs (default: nproc)
#   FUZZ_JOBS=N  targets fuzzed at once (default: nproc, at most the number of targets); each
#                runs for SECONDS either way, so more at once only shortens the wall time
#
# Build: CMake, -DHARRIER_FUZZ=ON, in build-fuzz (ccache when installed). Corpus: each target
# runs on build-fuzz/corpus/<target>, which starts as a copy of tests/fuzz/corpus/<target> and
# keeps what the fuzzer adds across runs (the tree stays clean; delete the folder to start
# over). Findings: build-fuzz/findings/<target>/ (crash-*, leak-*, timeout-*, oom-*), the output
# in build-fuzz/logs/<target>.log. Files a target writes: build-fuzz/tmp ($TMPDIR, emptied at each
# run). Reproduce one with build-fuzz/tests/fuzz/<target>_fuzzer FILE.
# Exit status: 0 when every target ran its time without a finding, 1 otherwise (a crash, a
# sanitizer report, a leak, a timeout, running out of memory, or a build failure).
# Needs clang and libFuzzer (Debian: clang, libclang-rt-14-dev); installs them if missing.
set -euo pipefail
cd "$(dirname "$0")/.."
seconds=${1:-60}
shift || true

# target        -max_len: the largest input worth mutating (HTTP/2: a few frames of a full
#               stream window; config.pbtxt: a long file; control text: a chat of a few
#               messages, the target's checks being quadratic in it; the rest: a few requests
#               or headers)
declare -A max_len=(
  [infer_codec]=4096
  [http1_request]=8192
  [http2_frames]=16384
  [grpc_infer_request]=8192
  [grpc_wire]=4096
  [model_config]=4096
  [trace_context]=1024
  [content_coding]=8192
  [traffic_policy]=2048
  [openai_request]=4096
  [model_control]=4096
  [model_load]=4096
  [control_text]=2048
)
all_targets=(infer_codec http1_request http2_frames grpc_infer_request grpc_wire model_config
             trace_context content_coding traffic_policy openai_request model_control model_load
             control_text)
targets=("$@")
((${#targets[@]})) || targets=("${all_targets[@]}")
for t in "${targets[@]}"; do
  [[ -n ${max_len[$t]:-} ]] || { echo "fuzz: unknown target '$t' (${all_targets[*]})" >&2; exit 2; }
done

sudo_() { if [[ $(id -u) == 0 ]]; then "$@"; else sudo "$@"; fi; }
if ! command -v clang++ >/dev/null ||
   [[ ! -e $(clang++ -print-resource-dir)/lib/linux/libclang_rt.fuzzer-x86_64.a ]]; then
  echo "fuzz: installing clang and libFuzzer" >&2
  sudo_ env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq clang libclang-rt-14-dev >/dev/null
fi

out=build-fuzz
start=$(date +%s)
launcher=()
command -v ccache >/dev/null && launcher=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache)
cmake -S . -B "$out" -G Ninja -DCMAKE_BUILD_TYPE=Debug -DCMAKE_CXX_COMPILER=clang++ \
  "${launcher[@]}" -DHARRIER_FUZZ=ON -DHARRIER_BUILD_TESTS=OFF -DHARRIER_BUILD_BENCH=OFF >/dev/null
if ! cmake --build "$out" -j "${JOBS:-$(nproc)}" --target $(printf '%s_fuzzer ' "${targets[@]}"); then
  echo "fuzz: FAILED to build the fuzz targets" >&2
  exit 1
fi
built=$(date +%s)
# What the targets write (model_load's repository) goes to a folder of the build's own, emptied
# at each run: a target that aborts on a finding leaves its files there, not in /tmp.
export TMPDIR=$PWD/$out/tmp
rm -rf "$TMPDIR"
mkdir -p "$TMPDIR"
echo "fuzz: built in $((built - start)) s; fuzzing ${#targets[@]} target(s) for ${seconds} s each"

# One target: its corpus (seeds added), its dictionary when there is one, its findings folder.
run_target() {
  local t=$1
  local corpus=$out/corpus/$t findings=$out/findings/$t
  mkdir -p "$corpus" "$findings" "$out/logs"
  local seed
  for seed in tests/fuzz/corpus/"$t"/*; do
    [[ -e $corpus/${seed##*/} ]] || cp "$seed" "$corpus"/
  done
  local dict=()
  [[ -f tests/fuzz/dict/$t.dict ]] && dict=(-dict="tests/fuzz/dict/$t.dict")
  ASAN_OPTIONS=detect_leaks=1:abort_on_error=0 UBSAN_OPTIONS=print_stacktrace=1 \
    "$out/tests/fuzz/${t}_fuzzer" "$corpus" "${dict[@]}" -max_total_time="$seconds" \
    -max_len="${max_len[$t]}" -timeout=25 -rss_limit_mb=2048 -artifact_prefix="$findings/" \
    -print_final_stats=1 >"$out/logs/$t.log" 2>&1
}

# What a log says: "ok ..." with the final coverage, or "FAILED ..." with the first report line.
summarize() {
  local t=$1 rc=$2 log=$out/logs/$1.log
  local done_line execs
  done_line=$(grep -a -E '^#[0-9]+[[:space:]]+DONE' "$log" | tail -1 || true)
  execs=$(grep -a -oE 'average_exec_per_sec: *[0-9]+' "$log" | grep -oE '[0-9]+$' || echo '?')
  if ((rc == 0)); then
    local cov ft corp
    cov=$(grep -oE 'cov: [0-9]+' <<<"$done_line" | grep -oE '[0-9]+' || echo '?')
    ft=$(grep -oE 'ft: [0-9]+' <<<"$done_line" | grep -oE '[0-9]+' || echo '?')
    corp=$(grep -oE 'corp: [0-9]+' <<<"$done_line" | grep -oE '[0-9]+' || echo '?')
    printf 'fuzz: %-20s ok      %4s s  %6s exec/s  cov %5s  ft %6s  corpus %5s\n' \
      "$t" "$seconds" "$execs" "$cov" "$ft" "$corp"
  else
    local what artifact
    what=$(grep -a -m1 -E 'ERROR: (libFuzzer|AddressSanitizer|LeakSanitizer|UndefinedBehaviorSanitizer)|runtime error:|fuzz harness:|_fuzzer: ' "$log" || echo "exit status $rc")
    artifact=$(grep -a -oE 'Test unit written to [^ ]+' "$log" | tail -1 | sed 's/Test unit written to //' || true)
    printf 'fuzz: %-20s FAILED  %s\n' "$t" "$what"
    printf 'fuzz: %-20s         input: %s  log: %s\n' "$t" "${artifact:-none}" "$log"
    # The report itself, for a CI log that is all one has: from its first line, 60 lines.
    sed -n -E '/ERROR: |runtime error:|fuzz harness:|_fuzzer: /,$p' "$log" | head -60 |
      sed "s/^/fuzz: $t | /"
  fi
}

jobs_at_once=${FUZZ_JOBS:-$(nproc)}
((jobs_at_once >= 1)) || jobs_at_once=1
declare -A target_of=() rc_of=()
queue=("${targets[@]}")
running=0
while ((${#queue[@]} || running)); do
  while ((${#queue[@]})) && ((running < jobs_at_once)); do
    run_target "${queue[0]}" &
    target_of[$!]=${queue[0]}
    queue=("${queue[@]:1}")
    running=$((running + 1))
  done
  rc=0
  wait -n -p finished || rc=$?
  rc_of[${target_of[$finished]}]=$rc
  running=$((running - 1))
done

failed=0
for t in "${targets[@]}"; do
  summarize "$t" "${rc_of[$t]}"
  ((rc_of[$t] == 0)) || failed=1
done
echo "fuzz: $( ((failed)) && echo FAILED || echo ok ) in $(($(date +%s) - start)) s" \
  "(build $((built - start)) s, fuzzing $(($(date +%s) - built)) s)"
exit "$failed"
