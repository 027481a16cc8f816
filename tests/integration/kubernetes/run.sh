#!/usr/bin/env bash
# The Kubernetes and KServe manifests, offline (there is no cluster here): deploy/kubernetes and
# deploy/kserve rendered by `kubectl kustomize`, turned into JSON (python3-yaml), then checked by
# validate_manifests.mjs against the Kubernetes API schemas (npm's kubernetes-models, locked in
# package-lock.json and installed outside the clone by ../npm_cache.sh), the Prometheus
# operator's, and a schema of KServe's ServingRuntime and InferenceService fields written from
# KServe's API; and against each other (the drain's numbers, selectors, ports, the HPA's metric).
#
#   usage: tests/integration/kubernetes/run.sh SOURCE_DIR WORK_DIR
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
src=$(cd "$1" && pwd)
work=$2
mkdir -p "$work"
modules=$(bash "$here/../npm_cache.sh" "$here" kubernetes)
for dir in kubernetes kserve; do
  if ! kubectl kustomize "$src/deploy/$dir" >"$work/$dir.yaml" 2>"$work/$dir.stderr"; then
    cat "$work/$dir.stderr" >&2
    echo "kubectl kustomize deploy/$dir failed"
    echo "0 passed, 1 failed"
    exit 1
  fi
done
cp "$src/deploy/kubernetes/prometheus-adapter-config.yaml" "$work/adapter.yaml"
/usr/bin/python3 - "$work" <<'EOF'
import json, sys, yaml
work = sys.argv[1]
for name in ("kubernetes", "kserve", "adapter"):
    with open("%s/%s.yaml" % (work, name)) as f:
        docs = [d for d in yaml.safe_load_all(f) if d is not None]
    with open("%s/%s.json" % (work, name), "w") as f:
        json.dump(docs, f)
    if name == "adapter":  # the adapter's own configuration, embedded as a string
        with open("%s/adapter-config.json" % work, "w") as f:
            json.dump(yaml.safe_load(docs[0]["data"]["config.yaml"]), f)
EOF
exec node "$here/validate_manifests.mjs" --node-modules "$modules" --work-dir "$work" \
  --source-dir "$src"
