// Validates the rendered manifests of deploy/kubernetes and deploy/kserve (run.sh renders them
// and hands them over as JSON): every object against its API schema, then the facts that tie them
// together and to Harrier. Prints one line per check and "N passed, N failed" last.
//
//   node validate_manifests.mjs --node-modules DIR --work-dir DIR --source-dir DIR
//
// Schemas: Kubernetes' own from kubernetes-models (the OpenAPI schemas of the API server, as
// client-side validation without a server; they check types, enums and required fields, not
// unknown fields, which is why the cross-checks below read the fields that matter by name); the
// Prometheus operator's ServiceMonitor from @kubernetes-models/prometheus-operator; KServe's
// ServingRuntime and InferenceService from KSERVE_SCHEMAS below, written from KServe's API types
// (serving.kserve.io v1alpha1 / v1beta1) for the fields these manifests use, with unknown fields
// refused, and their pod parts (containers, probes) validated as a Kubernetes Pod.
import fs from "node:fs";
import path from "node:path";

const args = {};
for (let i = 2; i < process.argv.length; i += 2) args[process.argv[i].slice(2)] = process.argv[i + 1];
const modules = args["node-modules"];
const work = args["work-dir"];
const source = args["source-dir"];

let passed = 0;
let failed = 0;
function check(what, ok, detail = "") {
  if (ok) {
    passed++;
    console.log(`ok    ${what}`);
  } else {
    failed++;
    console.log(`FAIL  ${what}${detail ? ": " + detail : ""}`);
  }
}

const load = (name) => JSON.parse(fs.readFileSync(path.join(work, name), "utf8"));
const kube = load("kubernetes.json");
const kserve = load("kserve.json");
const adapter = load("adapter.json");
const adapterConfig = load("adapter-config.json");

// ---- Schemas ------------------------------------------------------------------------------------

// apiVersion + kind -> the kubernetes-models module that validates it.
function modelModule(apiVersion, kind) {
  if (apiVersion === "monitoring.coreos.com/v1")
    return path.join(modules, "@kubernetes-models/prometheus-operator", apiVersion, `${kind}.mjs`);
  return path.join(modules, "kubernetes-models", apiVersion, `${kind}.mjs`);
}

async function validateKubernetes(doc, origin) {
  const what = `${origin}: ${doc.kind} ${doc.metadata?.name} against the ${doc.apiVersion} schema`;
  const file = modelModule(doc.apiVersion, doc.kind);
  if (!fs.existsSync(file)) return check(what, false, `no schema for ${doc.apiVersion} ${doc.kind}`);
  const Model = (await import(file))[doc.kind];
  try {
    new Model(doc).validate();
    check(what, true);
  } catch (e) {
    check(what, false, e.message);
  }
}

// A small JSON-schema subset: type, required, enum, properties (unknown ones refused unless
// `open`), items, minimum, and `pod: "containers"`, a list checked as a Pod's containers.
const str = { type: "string" };
const int = { type: "integer" };
const bool = { type: "boolean" };
const stringMap = { type: "object", open: true, values: str };
const KSERVE_SCHEMAS = {
  "serving.kserve.io/v1alpha1 ServingRuntime": {
    type: "object",
    required: ["apiVersion", "kind", "metadata", "spec"],
    properties: {
      apiVersion: str,
      kind: str,
      metadata: { type: "object", open: true, required: ["name"] },
      spec: {
        type: "object",
        required: ["containers", "supportedModelFormats"],
        properties: {
          annotations: stringMap,
          labels: stringMap,
          supportedModelFormats: {
            type: "array",
            items: {
              type: "object",
              required: ["name"],
              properties: { name: str, version: str, autoSelect: bool, priority: { ...int, minimum: 1 } },
            },
          },
          protocolVersions: { type: "array", items: { type: "string", enum: ["v1", "v2", "grpc-v1", "grpc-v2"] } },
          multiModel: bool,
          disabled: bool,
          grpcEndpoint: str,
          grpcDataEndpoint: str,
          httpDataEndpoint: str,
          replicas: int,
          containers: { type: "array", pod: "containers" },
          volumes: { type: "array" },
          nodeSelector: stringMap,
          tolerations: { type: "array" },
          affinity: { type: "object", open: true },
          imagePullSecrets: { type: "array" },
          serviceAccountName: str,
          priorityClassName: str,
        },
      },
    },
  },
  "serving.kserve.io/v1beta1 InferenceService": {
    type: "object",
    required: ["apiVersion", "kind", "metadata", "spec"],
    properties: {
      apiVersion: str,
      kind: str,
      metadata: { type: "object", open: true, required: ["name"] },
      spec: {
        type: "object",
        required: ["predictor"],
        properties: {
          predictor: {
            type: "object",
            properties: {
              minReplicas: { ...int, minimum: 0 },
              maxReplicas: { ...int, minimum: 0 },
              scaleTarget: int,
              scaleMetric: { type: "string", enum: ["cpu", "memory", "concurrency", "rps"] },
              containerConcurrency: int,
              timeout: int,
              canaryTrafficPercent: int,
              terminationGracePeriodSeconds: { ...int, minimum: 0 },
              serviceAccountName: str,
              nodeSelector: stringMap,
              tolerations: { type: "array" },
              model: {
                type: "object",
                required: ["modelFormat"],
                properties: {
                  modelFormat: { type: "object", required: ["name"], properties: { name: str, version: str } },
                  protocolVersion: { type: "string", enum: ["v1", "v2", "grpc-v1", "grpc-v2"] },
                  runtime: str,
                  storageUri: str,
                  resources: { type: "object", open: true },
                  args: { type: "array", items: str },
                  env: { type: "array" },
                },
              },
            },
          },
        },
      },
    },
  },
};

async function schemaErrors(value, schema, at) {
  const errors = [];
  const type = Array.isArray(value) ? "array" : Number.isInteger(value) ? "integer" : typeof value;
  if (schema.type && schema.type !== type) return [`${at}: ${schema.type} expected, got ${type}`];
  if (schema.enum && !schema.enum.includes(value)) errors.push(`${at}: ${value} not in ${schema.enum}`);
  if (schema.minimum !== undefined && value < schema.minimum) errors.push(`${at}: below ${schema.minimum}`);
  if (type === "object") {
    for (const key of schema.required ?? []) if (!(key in value)) errors.push(`${at}: ${key} is required`);
    for (const [key, v] of Object.entries(value)) {
      const sub = schema.properties?.[key] ?? schema.values;
      if (sub) errors.push(...(await schemaErrors(v, sub, `${at}.${key}`)));
      else if (!schema.open) errors.push(`${at}: unknown field ${key}`);
    }
  }
  if (type === "array" && schema.items)
    for (let i = 0; i < value.length; i++) errors.push(...(await schemaErrors(value[i], schema.items, `${at}[${i}]`)));
  if (type === "array" && schema.pod === "containers") {
    const { Pod } = await import(modelModule("v1", "Pod"));
    try {
      new Pod({ apiVersion: "v1", kind: "Pod", metadata: { name: "check" }, spec: { containers: value } }).validate();
    } catch (e) {
      errors.push(`${at} as a Pod's containers: ${e.message}`);
    }
  }
  return errors;
}

async function validateKServe(doc) {
  const key = `${doc.apiVersion} ${doc.kind}`;
  const schema = KSERVE_SCHEMAS[key];
  const what = `kserve: ${doc.kind} ${doc.metadata?.name} against KServe's ${doc.apiVersion} fields`;
  if (!schema) return check(what, false, `no schema for ${key}`);
  const errors = await schemaErrors(doc, schema, doc.kind);
  check(what, errors.length === 0, errors.join("; "));
}

for (const doc of kube) await validateKubernetes(doc, "kubernetes");
await validateKubernetes(adapter[0], "adapter");
for (const doc of kserve) await validateKServe(doc);

// The schema checks must be able to fail: a wrong type and a missing field are refused.
{
  const deployment = structuredClone(kube.find((d) => d.kind === "Deployment"));
  deployment.spec.template.spec.containers[0].ports[0].containerPort = "8000";
  delete deployment.spec.selector;
  const { Deployment } = await import(modelModule("apps/v1", "Deployment"));
  let refused = false;
  try {
    new Deployment(deployment).validate();
  } catch {
    refused = true;
  }
  check("self-check: a Deployment with a string port and no selector is refused", refused);
  const runtime = structuredClone(kserve.find((d) => d.kind === "ServingRuntime"));
  runtime.spec.protocolVersions.push("v3");
  runtime.spec.supportedModelFormat = [];
  const errors = await schemaErrors(runtime, KSERVE_SCHEMAS[`${runtime.apiVersion} ServingRuntime`], "x");
  check("self-check: a ServingRuntime with an unknown protocol and field is refused", errors.length === 2, errors.join("; "));
}

// ---- What ties them together ------------------------------------------------------------------

const one = (docs, kind) => docs.filter((d) => d.kind === kind);
const subset = (small, big) => Object.entries(small ?? {}).every(([k, v]) => big?.[k] === v);
const flagValue = (argv, flag) => {
  const arg = argv.find((a) => a.startsWith(flag + "="));
  return arg === undefined ? undefined : Number(arg.slice(flag.length + 1));
};

const [deployment] = one(kube, "Deployment");
const [service] = one(kube, "Service");
const [hpa] = one(kube, "HorizontalPodAutoscaler");
const [pdb] = one(kube, "PodDisruptionBudget");
const [monitor] = one(kube, "ServiceMonitor");
const [pvc] = one(kube, "PersistentVolumeClaim");
check("kubernetes: one each of Deployment, Service, HPA, PDB, ServiceMonitor, PVC",
      [deployment, service, hpa, pdb, monitor, pvc].every(Boolean));

const pod = deployment.spec.template;
const container = pod.spec.containers.find((c) => c.name === "harrier");
const portNames = new Set(container.ports.map((p) => p.name));
const delay = flagValue(container.args, "--shutdown-delay-secs");
const exitTimeout = flagValue(container.args, "--exit-timeout-secs");
check("deployment: the drain's flags are set", delay > 0 && exitTimeout > 0, `${delay}, ${exitTimeout}`);
check("deployment: terminationGracePeriodSeconds > shutdown delay + exit timeout",
      pod.spec.terminationGracePeriodSeconds > delay + exitTimeout,
      `${pod.spec.terminationGracePeriodSeconds} vs ${delay} + ${exitTimeout}`);
const preStop = container.lifecycle?.preStop;
check("deployment: no preStop hook postpones SIGTERM (the delay is Harrier's)", preStop === undefined);
check("deployment: readiness probes /v2/health/ready on a named port",
      container.readinessProbe?.httpGet?.path === "/v2/health/ready" &&
        portNames.has(container.readinessProbe.httpGet.port));
check("deployment: liveness probes /v2/health/live (200 through the drain)",
      container.livenessProbe?.httpGet?.path === "/v2/health/live" &&
        portNames.has(container.livenessProbe.httpGet.port));
check("deployment: a startup probe covers model loading (>= 2 minutes)",
      container.startupProbe?.httpGet?.path?.startsWith("/v2/health/") &&
        container.startupProbe.periodSeconds * container.startupProbe.failureThreshold >= 120);
check("deployment: the readiness probe sees the drain within the shutdown delay",
      container.readinessProbe.periodSeconds * container.readinessProbe.failureThreshold < delay);
check("deployment: ports http 8000, grpc 8001, metrics 8002 as the flags say",
      container.ports.every((p) => flagValue(container.args, `--${p.name}-port`) === p.containerPort) &&
        ["http", "grpc", "metrics"].every((n) => portNames.has(n)));
check("deployment: runs as non-root, no privilege escalation, all capabilities dropped",
      pod.spec.securityContext?.runAsNonRoot === true && pod.spec.securityContext.runAsUser > 0 &&
        container.securityContext?.allowPrivilegeEscalation === false &&
        JSON.stringify(container.securityContext?.capabilities?.drop) === '["ALL"]');
check("deployment: read-only root file system", container.securityContext?.readOnlyRootFilesystem === true);
check("deployment: cpu and memory requests and limits",
      ["requests", "limits"].every((k) => container.resources?.[k]?.cpu && container.resources?.[k]?.memory));
const modelsMount = container.volumeMounts.find((m) => container.args.includes(`--model-repository=${m.mountPath}`));
const modelsVolume = pod.spec.volumes.find((v) => v.name === modelsMount?.name);
check("deployment: the model repository is a read-only volume from the PVC",
      modelsMount?.readOnly === true && modelsVolume?.persistentVolumeClaim?.claimName === pvc.metadata.name);
check("deployment: the selector matches the pod's labels", subset(deployment.spec.selector.matchLabels, pod.metadata.labels));
check("deployment: a rolling update never takes a ready replica away first",
      deployment.spec.strategy?.rollingUpdate?.maxUnavailable === 0);

check("service: selects the pods", subset(service.spec.selector, pod.metadata.labels));
check("service: http, grpc and metrics, each to a container port by name",
      ["http", "grpc", "metrics"].every((n) => service.spec.ports.some((p) => p.name === n && portNames.has(p.targetPort))));

check("pdb: selects the pods", subset(pdb.spec.selector.matchLabels, pod.metadata.labels));
check("hpa: scales the Deployment",
      hpa.spec.scaleTargetRef.kind === "Deployment" && hpa.spec.scaleTargetRef.name === deployment.metadata.name);
const hpaMetric = hpa.spec.metrics.find((m) => m.type === "Pods")?.pods?.metric?.name;
check("hpa: on the per-pod waiting-requests gauge", hpaMetric === "harrier_queue_depth");
check("hpa: minReplicas leaves a replica serving while another drains", hpa.spec.minReplicas >= 2);
const metricsSource = fs.readFileSync(path.join(source, "src/observability/model_metrics.cc"), "utf8");
check("hpa: Harrier exposes the metric it scales on", metricsSource.includes(`"${hpaMetric}"`));
const rule = adapterConfig.rules.find((r) => r.name?.as === hpaMetric);
check("adapter: a rule serves the HPA's metric", rule !== undefined);
check("adapter: the rule maps namespace and pod labels to resources",
      rule?.resources?.overrides?.namespace?.resource === "namespace" && rule?.resources?.overrides?.pod?.resource === "pod");
check("adapter: the rule's series is the gauge itself, summed per pod",
      rule?.seriesQuery?.startsWith(hpaMetric + "{") && /sum\(<<\.Series>>\{<<\.LabelMatchers>>\}\) by \(<<\.GroupBy>>\)/.test(rule?.metricsQuery));
for (const r of adapterConfig.rules) {
  const family = r.seriesQuery.split("{")[0];
  check(`adapter: ${family} is a family Harrier exposes`, metricsSource.includes(`"${family}"`));
}

check("servicemonitor: selects the Service", subset(monitor.spec.selector.matchLabels, service.metadata.labels));
check("servicemonitor: scrapes the metrics port at /metrics",
      monitor.spec.endpoints.some((e) => e.port === "metrics" && e.path === "/metrics") &&
        service.spec.ports.some((p) => p.name === "metrics"));

const [runtime] = one(kserve, "ServingRuntime");
const [isvc] = one(kserve, "InferenceService");
const rc = runtime.spec.containers[0];
const rDelay = flagValue(rc.args, "--shutdown-delay-secs");
const rExit = flagValue(rc.args, "--exit-timeout-secs");
check("kserve: the runtime's container is kserve-container, serving /mnt/models on 8080 and 9000",
      rc.name === "kserve-container" && rc.args.includes("--model-repository=/mnt/models") &&
        flagValue(rc.args, "--http-port") === 8080 && flagValue(rc.args, "--grpc-port") === 9000);
check("kserve: the runtime declares onnx on protocol v2",
      runtime.spec.supportedModelFormats.some((f) => f.name === "onnx") && runtime.spec.protocolVersions.includes("v2"));
check("kserve: the runtime runs non-root with a read-only root file system",
      rc.securityContext?.runAsNonRoot === true && rc.securityContext?.readOnlyRootFilesystem === true);
check("kserve: the InferenceService uses the runtime for a format and protocol it declares",
      isvc.spec.predictor.model.runtime === runtime.metadata.name &&
        runtime.spec.supportedModelFormats.some((f) => f.name === isvc.spec.predictor.model.modelFormat.name) &&
        runtime.spec.protocolVersions.includes(isvc.spec.predictor.model.protocolVersion));
check("kserve: terminationGracePeriodSeconds > the runtime's shutdown delay + exit timeout",
      isvc.spec.predictor.terminationGracePeriodSeconds > rDelay + rExit);

console.log(`${passed} passed, ${failed} failed`);
process.exit(failed === 0 ? 0 : 1);
