#!/usr/bin/env bash
# Installs the locked npm packages of a Node test client once into a cache outside the clone,
# keyed by its lock file's hash, and prints the node_modules folder to use.
#
#   usage: tests/integration/npm_cache.sh PACKAGE_DIR NAME
#
# PACKAGE_DIR holds package.json and package-lock.json; the packages go to
# $HARRIER_DEPS/node-NAME-<hash>/ (HARRIER_DEPS defaults to ~/.cache/harrier-deps, as for
# tools/deps.sh). npm runs with --ignore-scripts: no package code runs at install time.
set -euo pipefail
dir=$(cd "$1" && pwd)
name=$2
deps=${HARRIER_DEPS:-${XDG_CACHE_HOME:-$HOME/.cache}/harrier-deps}
hash=$(sha256sum "$dir/package-lock.json" | cut -c1-16)
modules=$deps/node-$name-$hash
if [[ ! -f $modules/.complete ]]; then
  echo "$name test: installing its npm packages into $modules" >&2
  rm -rf "$modules.partial"
  mkdir -p "$modules.partial"
  cp "$dir/package.json" "$dir/package-lock.json" "$modules.partial/"
  (cd "$modules.partial" && npm ci --ignore-scripts --no-audit --no-fund --loglevel=error >&2)
  touch "$modules.partial/.complete"
  rm -rf "$modules"
  mv "$modules.partial" "$modules"
fi
echo "$modules/node_modules"
