#!/usr/bin/env bash
# The official `openai` npm package, unmodified apart from its baseURL, against the real binary:
# the locked package (installed once, outside the clone, by ../npm_cache.sh), then
# openai_test.mjs.
#
#   usage: tests/integration/openai/run.sh HARRIER_BINARY SOURCE_DIR WORK_DIR
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
modules=$(bash "$here/../npm_cache.sh" "$here" openai)
exec node "$here/openai_test.mjs" --harrier "$1" --source-dir "$2" --work-dir "$3" \
  --node-modules "$modules"
