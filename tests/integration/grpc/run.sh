#!/usr/bin/env bash
# Harrier's gRPC integration test (an independent client: Node's @grpc/grpc-js) against the real
# binary. Installs the locked npm packages once into a cache outside the clone, keyed by the lock
# file's hash, then runs grpc_test.mjs.
#
#   usage: tests/integration/grpc/run.sh HARRIER_BINARY SOURCE_DIR WORK_DIR
#
# HARRIER_DEPS (default ~/.cache/harrier-deps) is where the packages go, as for tools/deps.sh.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
deps=${HARRIER_DEPS:-${XDG_CACHE_HOME:-$HOME/.cache}/harrier-deps}
hash=$(sha256sum "$here/package-lock.json" | cut -c1-16)
modules=$deps/node-grpc-$hash
if [[ ! -f $modules/.complete ]]; then
  echo "grpc test: installing @grpc/grpc-js and @grpc/proto-loader into $modules" >&2
  rm -rf "$modules.partial"
  mkdir -p "$modules.partial"
  cp "$here/package.json" "$here/package-lock.json" "$modules.partial/"
  (cd "$modules.partial" && npm ci --ignore-scripts --no-audit --no-fund --loglevel=error >&2)
  touch "$modules.partial/.complete"
  rm -rf "$modules"
  mv "$modules.partial" "$modules"
fi
exec node "$here/grpc_test.mjs" --harrier "$1" --source-dir "$2" --work-dir "$3" \
  --node-modules "$modules/node_modules"
