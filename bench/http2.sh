#!/usr/bin/env bash
# HTTP/2 against HTTP/1.1 on the same server in one run (docs/benchmarks.md, "HTTP/2 (issue 4)").
#
# usage: bench/http2.sh BUILD_DIR [SECONDS] [MODEL]
#
# Needs the bench kit's repository and bodies (~/.cache/harrier-bench, made by
# ../shared/bench/compare.sh). Starts harrier on that repository with TLS (a throwaway
# certificate), then per line a 2 s warm-up and SECONDS (default 8) of closed-loop load:
#   wrk (HTTP/1.1, 1 thread) at 1, 10, 16 and 160 connections;
#   h2load (h2c) with 1×1, 1×10 and 16×10 connections×streams, and 16×10 over TLS (h2);
# interleaved, and the 160-connection pair repeated at the end as a drift check.
# Percentiles for h2load come from its per-request log (--log-file). JSON bodies unless
# FORMAT=bin; extra `harrier serve` flags in HARRIER_ARGS (the figures in docs/benchmarks.md
# use HARRIER_ARGS="--overload-protection off", so that shedding does not mix into a transport
# comparison). MODEL other than tiny (resnet50): 1 and 4 connections / streams only.
set -euo pipefail
build=${1:?usage: bench/http2.sh BUILD_DIR [SECONDS] [MODEL]}
DUR=${2:-8}
MODEL=${3:-tiny}
FORMAT=${FORMAT:-json}
BENCH_HOME=${BENCH_HOME:-$HOME/.cache/harrier-bench}
peers=$(cd "$(dirname "$0")/../../shared/peers" && pwd)
work=$(mktemp -d)
trap 'kill $PID 2>/dev/null || true; wait $PID 2>/dev/null || true; rm -rf "$work"' EXIT

openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -keyout "$work/key.pem" \
  -out "$work/cert.pem" -days 1 -subj /CN=localhost >/dev/null 2>&1
port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
tport=$((port + 1))
"$build/harrier" serve --model-repository "$BENCH_HOME/repo" --http-port "$port" \
  --https-port "$tport" --grpc-port $((port + 2)) --metrics-port $((port + 3)) \
  --tls-cert "$work/cert.pem" --tls-key "$work/key.pem" ${HARRIER_ARGS:-} >"$work/harrier.log" 2>&1 &
PID=$!
for _ in $(seq 200); do
  curl -sf "http://127.0.0.1:$port/v2/health/ready" >/dev/null && break
  sleep 0.2
done

body=$BENCH_HOME/bodies/$MODEL.$FORMAT ctype=application/json ihcl=""
if [[ $FORMAT == bin ]]; then ctype=application/octet-stream; ihcl=$(cat "$body.ihcl"); fi
url=/v2/models/$MODEL/infer

wrk_line() { # conns
  BODY=$body CTYPE=$ctype IHCL=$ihcl wrk -t1 -c"$1" -d2s -s "$peers/post.lua" \
    "http://127.0.0.1:$port$url" >/dev/null 2>&1 || true
  local r
  r=$(BODY=$body CTYPE=$ctype IHCL=$ihcl wrk -t1 -c"$1" -d"${DUR}s" --timeout 10s \
    -s "$peers/post.lua" "http://127.0.0.1:$port$url" | grep '^RESULT')
  echo "http/1.1 wrk c=$1 ${r#RESULT }"
}

h2_line() { # scheme port conns streams
  local hdr=(-H "content-type: $ctype")
  [[ -n $ihcl ]] && hdr+=(-H "inference-header-content-length: $ihcl")
  h2load -c"$3" -m"$4" -D 2 -d "$body" "${hdr[@]}" "$1://127.0.0.1:$2$url" >/dev/null 2>&1 || true
  rm -f "$work/h2.log"  # h2load appends to its log file
  h2load -c"$3" -m"$4" -D "$DUR" -d "$body" "${hdr[@]}" --log-file "$work/h2.log" \
    "$1://127.0.0.1:$2$url" >"$work/h2.out" 2>&1 || true
  python3 - "$work/h2.log" "$DUR" "$1" "$3" "$4" "$work/h2.out" <<'PY'
import sys
import re
rows = [l.split() for l in open(sys.argv[1]) if l.strip()]
# Throughput as h2load reports it ("finished in 8.00s, N req/s"); percentiles from the log.
m = re.search(r"finished in [0-9.]+m?s, ([0-9.]+) req/s", open(sys.argv[6]).read())
ok = sorted(int(r[2]) for r in rows if r[1] == "200")
bad = sum(1 for r in rows if r[1] != "200")
pct = lambda q: ok[min(len(ok) - 1, int(q * len(ok)))] if ok else 0
proto = "h2c" if sys.argv[3] == "http" else "h2"
print("%s h2load c=%s m=%s requests=%d errors=%d rps=%.1f p50_us=%d p90_us=%d p99_us=%d"
      % (proto, sys.argv[4], sys.argv[5], len(ok), bad, float(m.group(1)) if m else -1.0,
         pct(0.5), pct(0.9), pct(0.99)))
PY
}

if [[ $MODEL != tiny ]]; then  # a heavy model: low concurrency only
  wrk_line 1
  h2_line http "$port" 1 1
  wrk_line 4
  h2_line http "$port" 1 4
  h2_line https "$tport" 1 4
  exit 0
fi
# Interleaved, so that drift in the machine's load hits both protocols alike.
wrk_line 1
h2_line http "$port" 1 1
wrk_line 10
h2_line http "$port" 1 10
wrk_line 16
wrk_line 160
h2_line http "$port" 16 10
h2_line https "$tport" 16 10
wrk_line 160
h2_line http "$port" 16 10
