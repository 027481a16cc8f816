#!/usr/bin/env bash
# Generation (issue 13): Harrier against llama.cpp's own llama-server, the same GGUF, the same
# llama.cpp (v0.4.0, the same ggml CPU flags), the same engine settings, the same load.
#
#   bench/generation.sh [HARRIER_BINARY]         (default: build/harrier)
#
# Environment (defaults in brackets):
#   MODEL          the GGUF [$BENCH_HOME/models/llama-134m-random.gguf, made by
#                  tools/make_llama_gguf.py when missing]
#   THREADS        llama.cpp's compute threads in both servers [nproc]. Keep it at or below the
#                  cores that are really free: ggml's threads meet at a spinning barrier after
#                  every operation, and one thread descheduled by other work stalls the others
#                  for its whole time slice (docs/benchmarks.md)
#   STREAMS        concurrent streams, one run each ["1 4 8"]
#   MAX_TOKENS     max_tokens of every request [128]
#   REQUESTS       requests per stream, one after another, in each run [8]
#   PARALLEL       sequences decoded together [8]: Harrier's parallel_sequences, llama-server's -np
#   CONTEXT        KV cells in all [PARALLEL x (MAX_TOKENS + 64), rounded up to 256]: Harrier's
#                  context_size, llama-server's -c (its KV cache unified, as Harrier's is)
#   PORTS          four ports: Harrier's HTTP, gRPC and metrics, llama-server's [four free ones]
#   SYSTEMS        which servers, in this order ["harrier llama-server"]
#   LLAMA_SERVER   llama-server binary [bench/llama_server_build.sh's, built when missing]
#   HARRIER_ARGS, LLAMA_SERVER_ARGS   more flags for either (the later of a repeated
#                  llama-server flag wins, so LLAMA_SERVER_ARGS="--poll 50" restores its default)
#   BUSY           busy-looping processes run beside the servers while they are driven [0]:
#                  a machine whose other work outnumbers its free cores, where ggml's spinning
#                  barrier collapses (Harrier gives its steps fewer threads then:
#                  src/backends/llamacpp/thread_governor.h)
#   BENCH_HOME     [~/.cache/harrier-bench]
#
# Each server is started alone, waited for (LOAD line: seconds from its start to ready), warmed
# with two unmeasured requests, then driven by bench/stream_load.py once per STREAMS value, and
# stopped before the next one starts. Output, one line per system and stream count:
#   RESULT system=harrier streams=4 ... tokens_per_s=... ttft_p50_ms=... ttft_p99_ms=...
#          cpu_us_per_token=... server_us_per_token=...
# and a THREADS line with the CPU per thread name. docs/benchmarks.md ("Generation: Harrier
# against llama-server") says what each figure means. Every process started here is stopped by
# its PID on exit, failure included.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
harrier=$(realpath "${1:-build/harrier}")
BENCH_HOME=${BENCH_HOME:-$HOME/.cache/harrier-bench}
export BENCH_HOME
PY=/usr/bin/python3
MODEL=${MODEL:-$BENCH_HOME/models/llama-134m-random.gguf}
THREADS=${THREADS:-$(nproc)}
STREAMS=${STREAMS:-1 4 8}
MAX_TOKENS=${MAX_TOKENS:-128}
REQUESTS=${REQUESTS:-8}
PARALLEL=${PARALLEL:-8}
CONTEXT=${CONTEXT:-$(((PARALLEL * (MAX_TOKENS + 64) + 255) / 256 * 256))}
SYSTEMS=${SYSTEMS:-harrier llama-server}
BUSY=${BUSY:-0}
name=bench-llama

for system in $SYSTEMS; do
  if [[ $system != harrier && $system != llama-server ]]; then
    echo "generation.sh: unknown system '$system' (harrier, llama-server)" >&2
    exit 2
  fi
done

work=$(mktemp -d)
pid=""
busy_pids=()
cleanup() {
  if [[ -n $pid ]]; then
    kill "$pid" 2>/dev/null || true
    wait "$pid" 2>/dev/null || true
  fi
  stop_busy
  rm -rf "$work"
}
start_busy() {
  for _ in $(seq "$BUSY"); do
    sh -c 'while :; do :; done' &
    busy_pids+=($!)
  done
}
stop_busy() {
  if ((${#busy_pids[@]})); then
    kill "${busy_pids[@]}" 2>/dev/null || true
    wait "${busy_pids[@]}" 2>/dev/null || true
  fi
  busy_pids=()
}
trap cleanup EXIT
trap 'exit 130' INT TERM

if [[ ! -f $MODEL ]]; then
  if [[ $MODEL != "$BENCH_HOME/models/llama-134m-random.gguf" ]]; then
    echo "generation.sh: no model at $MODEL" >&2
    exit 1
  fi
  mkdir -p "$BENCH_HOME/models"
  "$PY" "$here/../tools/make_llama_gguf.py" "$MODEL"
fi
MODEL=$(realpath "$MODEL")
if [[ -z ${PORTS:-} ]]; then
  # Four ports the kernel calls free now (closed again at once: another process could take one
  # before a server binds it, and the server's start then fails, saying so).
  PORTS=$("$PY" -c '
import socket
socks = [socket.socket() for _ in range(4)]
for s in socks:
    s.bind(("127.0.0.1", 0))
print(" ".join(str(s.getsockname()[1]) for s in socks))')
fi
read -r http_port grpc_port metrics_port llama_port <<<"$PORTS"

# wait_ready URL LOG NAME: until URL answers 200 (or the server dies, or 300 s pass); prints the
# seconds it took from the server's start ($started).
wait_ready() {
  for _ in $(seq 3000); do
    if curl -sf -o /dev/null "$1"; then
      awk -v start="$started" -v now="$(date +%s.%N)" -v who="$3" \
        'BEGIN { printf "LOAD system=%s seconds=%.2f\n", who, now - start }'
      return
    fi
    if ! kill -0 "$pid" 2>/dev/null; then break; fi
    sleep 0.1
  done
  echo "generation.sh: $3 did not become ready; its log:" >&2
  tail -n 40 "$2" >&2
  exit 1
}

stop() {
  kill "$pid"
  wait "$pid" 2>/dev/null || true
  pid=""
}

# drive SYSTEM PORT [--engine-threads REGEX]: the warm-up, then one run per stream count.
drive() {
  local system=$1 port=$2
  shift 2
  local warmup=2 # the first run's: two short requests of their own prompts, unmeasured
  for streams in $STREAMS; do
    "$PY" "$here/stream_load.py" --url "http://127.0.0.1:$port" --model "$name" \
      --streams "$streams" --requests "$REQUESTS" --max-tokens "$MAX_TOKENS" --pid "$pid" \
      --system "$system" --warmup "$warmup" "$@"
    warmup=0
  done
}

start_harrier() {
  mkdir -p "$work/repo/$name/1"
  ln -s "$MODEL" "$work/repo/$name/1/model.gguf"
  cat >"$work/repo/$name/config.pbtxt" <<EOF
backend: "llama.cpp"
parameters { key: "threads" value { string_value: "$THREADS" } }
parameters { key: "parallel_sequences" value { string_value: "$PARALLEL" } }
parameters { key: "context_size" value { string_value: "$CONTEXT" } }
EOF
  started=$(date +%s.%N)
  # shellcheck disable=SC2086 # HARRIER_ARGS: words
  "$harrier" serve --model-repository "$work/repo" --http-address 127.0.0.1 \
    --http-port "$http_port" --grpc-port "$grpc_port" --metrics-port "$metrics_port" \
    ${HARRIER_ARGS:-} >"$work/harrier.log" 2>&1 &
  pid=$!
  wait_ready "http://127.0.0.1:$http_port/v2/models/$name/ready" "$work/harrier.log" harrier
}

# llama-server with Harrier's engine settings: the same threads for single tokens and batches
# (no -tb: the batch pool's settings are then a copy of -t's, --poll included, and one pool
# serves both, as in Harrier; with -tb the batch pool would keep the default polling),
# PARALLEL slots over one unified KV cache of CONTEXT cells (with -np given, llama-server would
# otherwise split the cells into PARALLEL fixed parts), continuous batching (its default, named
# anyway), batches of at most 512 tokens (Harrier's batch_size; llama-server's default is 2048)
# and no polling (Harrier's ggml pool sleeps between graphs; llama-server's default, --poll 50,
# spins). No web UI.
start_llama_server() {
  local bin=${LLAMA_SERVER:-}
  if [[ -z $bin ]]; then
    bin=$("$here/llama_server_build.sh" | tail -n 1)
  fi
  started=$(date +%s.%N)
  # shellcheck disable=SC2086 # LLAMA_SERVER_ARGS: words
  "$bin" -m "$MODEL" --alias "$name" --host 127.0.0.1 --port "$llama_port" \
    -t "$THREADS" -np "$PARALLEL" -c "$CONTEXT" --kv-unified --cont-batching \
    -b 512 --poll 0 --no-webui ${LLAMA_SERVER_ARGS:-} >"$work/llama-server.log" 2>&1 &
  pid=$!
  wait_ready "http://127.0.0.1:$llama_port/health" "$work/llama-server.log" llama-server
}

echo "generation: $(nproc) cores, $(uptime | sed 's/.*load/load/'); model $MODEL" \
  "($(stat -c %s "$MODEL") bytes); THREADS=$THREADS PARALLEL=$PARALLEL CONTEXT=$CONTEXT" \
  "MAX_TOKENS=$MAX_TOKENS REQUESTS=$REQUESTS STREAMS='$STREAMS' BUSY=$BUSY"
for system in $SYSTEMS; do
  case $system in
    harrier)
      start_harrier
      start_busy
      # llama.cpp's threads (the engine thread and ggml's pool) carry the name they inherit
      # from the main thread, which loads the models at start-up: "harrier".
      drive harrier "$http_port" --engine-threads llama-engine
      ;;
    llama-server)
      start_llama_server
      start_busy
      # All of llama-server's threads carry its name, so its own cost is not told apart from
      # the engine's: cpu_us_per_token (the whole process) is the figure to compare.
      drive llama-server "$llama_port"
      ;;
  esac
  stop_busy
  stop
done
echo "after: $(uptime | sed 's/.*load/load/')"
