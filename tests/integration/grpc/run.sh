#!/usr/bin/env bash
# Harrier's gRPC integration test (an independent client: Node's @grpc/grpc-js) against the real
# binary: the locked npm packages (installed once, outside the clone, by ../npm_cache.sh), then
# grpc_test.mjs.
#
#   usage: tests/integration/grpc/run.sh HARRIER_BINARY SOURCE_DIR WORK_DIR
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
modules=$(bash "$here/../npm_cache.sh" "$here" grpc)
exec node "$here/grpc_test.mjs" --harrier "$1" --source-dir "$2" --work-dir "$3" \
  --node-modules "$modules"
