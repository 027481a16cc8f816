#!/usr/bin/env bash
# tools/make_run_check.sh — the README's first command, as written: `make run` serves
# examples/models on http://localhost:8000, and the README's curl example is answered with the
# sums and differences. CI runs it after `make test`, when the build is up to date, so it takes
# seconds. It stops what it started (SIGTERM to make, which passes it on).
set -euo pipefail
cd "$(dirname "$0")/.."
log=${BUILD:-build}/make-run.log
mkdir -p "$(dirname "$log")"
if curl -s -o /dev/null localhost:8000/; then
  echo "make_run_check: port 8000 is taken already; make run needs it" >&2
  exit 1
fi
setsid make run > "$log" 2>&1 &
pid=$!
# make passes a SIGTERM on to the server (one signal: a graceful stop; a second, to the whole
# group, would be "exit now").
trap 'kill -TERM "$pid" 2>/dev/null || true; wait "$pid" 2>/dev/null || true' EXIT
for _ in $(seq 1200); do  # up to 10 minutes: make run installs and builds what is missing
  curl -sf -o /dev/null localhost:8000/v2/health/ready && break
  if ! kill -0 "$pid" 2>/dev/null; then
    echo "make_run_check: make run exited before serving:" >&2
    tail -30 "$log" >&2
    exit 1
  fi
  sleep 0.5
done
# The README's example, byte for byte.
answer=$(curl -s localhost:8000/v2/models/simple/infer -d '{
  "inputs": [
    {"name": "INPUT0", "shape": [1, 16], "datatype": "INT32", "data": [1,2,3,4,5,6,7,8,9,10,11,12,13,14,15,16]},
    {"name": "INPUT1", "shape": [1, 16], "datatype": "INT32", "data": [1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1]}
  ]}')
for want in '"name":"OUTPUT0","datatype":"INT32","shape":[1,16],"data":[2,3,4,5,6,7,8,9,10,11,12,13,14,15,16,17]' \
            '"name":"OUTPUT1","datatype":"INT32","shape":[1,16],"data":[0,1,2,3,4,5,6,7,8,9,10,11,12,13,14,15]'; do
  if [[ $answer != *"$want"* ]]; then
    echo "make_run_check: the README's curl example got: $answer" >&2
    exit 1
  fi
done
echo "make_run_check: make run serves on port 8000 and answers the README's example"
