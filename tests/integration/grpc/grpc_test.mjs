// Harrier's gRPC integration test: the real `harrier` binary on free ports, driven by an
// independent client (Node's @grpc/grpc-js with @grpc/proto-loader reading Harrier's .proto).
//
//   usage: node grpc_test.mjs --harrier BIN --source-dir SRC --work-dir DIR --node-modules DIR
//          [-k PATTERN]
//   (tests/integration/grpc/run.sh installs the packages and passes --node-modules.)
//
// Builds a model repository in DIR/repo (tools/make_test_models.py + make_example_models.py),
// starts harrier with --grpc-port 0 and reads the bound port from its log, then calls every RPC:
// health, metadata, config, statistics, repository index, load/unload (UNAVAILABLE in mode none), inference
// with every data type raw and typed, output subsets, classification, a stream of 1,000 requests
// (each response checked against its own input), a call and a stream cancelled mid-flight and a
// deadline that expires on the `slow` model (all seen by the server: its `fail` statistics move,
// its `success` do not), bad inputs (each answered with its code, after which a good request
// still succeeds), TLS and mutual TLS, tracing (traceparent metadata, traceresponse, spans at an
// OTLP/HTTP receiver the test runs), and SIGTERM with a call running and one queued. The last
// line is "N passed, N failed"; the exit status is non-zero when anything failed.
import { spawn, spawnSync } from 'node:child_process';
import fs from 'node:fs';
import http from 'node:http';
import { createRequire } from 'node:module';
import path from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';

// ---- Arguments and packages ---------------------------------------------------------------

const args = { patterns: [] };
for (let i = 2; i < process.argv.length; i++) {
  const a = process.argv[i];
  if (a === '-k') args.patterns.push(process.argv[++i]);
  else if (a.startsWith('--')) args[a.slice(2).replace(/-/g, '_')] = process.argv[++i];
}
for (const need of ['harrier', 'source_dir', 'work_dir', 'node_modules']) {
  if (!args[need]) {
    console.error(`missing --${need.replace(/_/g, '-')}`);
    process.exit(2);
  }
}
const require = createRequire(path.join(path.resolve(args.node_modules), 'noop.js'));
const grpc = require('@grpc/grpc-js');
const protoLoader = require('@grpc/proto-loader');

const SRC = path.resolve(args.source_dir);
const WORK = path.resolve(args.work_dir);
const REPO = path.join(WORK, 'repo');
const MAX_BODY_BYTES = 8 << 20;  // the server's --max-body-bytes: gRPC's receive limit too
const Code = grpc.status;

const definition = protoLoader.loadSync('grpc_service.proto', {
  includeDirs: [path.join(SRC, 'src/protocol/grpc'), path.join(SRC, 'src/repository')],
  keepCase: true, longs: Number, enums: String, defaults: true, oneofs: true,
});
const Service = grpc.loadPackageDefinition(definition).inference.GRPCInferenceService;

// ---- The server process -------------------------------------------------------------------

class Harrier {
  constructor(name, extraArgs = []) {
    this.logPath = path.join(WORK, `${name}.log`);
    this.log = '';
    this.proc = spawn(args.harrier, ['serve', '--model-repository', REPO, '--http-port', '0',
      '--grpc-port', '0', '--metrics-port', '0', '--max-body-bytes', String(MAX_BODY_BYTES),
      '--http-threads', '2', ...extraArgs], { stdio: ['ignore', 'pipe', 'pipe'] });
    const sink = fs.createWriteStream(this.logPath);
    for (const s of [this.proc.stdout, this.proc.stderr]) {
      s.on('data', (d) => { this.log += d.toString(); sink.write(d); });
    }
    this.exited = new Promise((resolve) => this.proc.on('exit', (code, signal) =>
      resolve({ code, signal })));
  }

  httpPort() {
    return Number(/listening on HTTP \S+?:(\d+)/.exec(this.log)[1]);
  }

  // The metrics port starts after the gRPC port: its line may come later than grpcPort()'s.
  async metricsPort(timeoutMs = 30000) {
    const deadline = Date.now() + timeoutMs;
    while (Date.now() < deadline) {
      const m = /listening on metrics \S+?:(\d+)/.exec(this.log);
      if (m) return Number(m[1]);
      if (this.proc.exitCode !== null) break;
      await sleep(10);
    }
    throw new Error(`no "listening on metrics" line; log:\n${this.log.slice(-3000)}`);
  }

  async grpcPort(timeoutMs = 120000) {
    const deadline = Date.now() + timeoutMs;
    while (Date.now() < deadline) {
      const m = /listening on gRPC \S+?:(\d+)/.exec(this.log);
      if (m) return Number(m[1]);
      if (this.proc.exitCode !== null) break;
      await sleep(50);
    }
    throw new Error(`no "listening on gRPC" line; log:\n${this.log.slice(-3000)}`);
  }

  async stop(signal = 'SIGTERM') {
    if (this.proc.exitCode === null) this.proc.kill(signal);
    const timer = setTimeout(() => this.proc.kill('SIGKILL'), 60000);
    const result = await this.exited;
    clearTimeout(timer);
    return result;
  }
}

function client(port, credentials = grpc.credentials.createInsecure(), options = {}) {
  return new Service(`127.0.0.1:${port}`, credentials, {
    'grpc.max_send_message_length': -1, 'grpc.max_receive_message_length': -1, ...options,
  });
}

// A unary call as a promise; `opts.deadlineMs` sets grpc-timeout; `opts.onCall` sees the call.
function unary(c, method, request, opts = {}) {
  const callOptions = {};
  if (opts.deadlineMs) callOptions.deadline = new Date(Date.now() + opts.deadlineMs);
  const metadata = new grpc.Metadata();
  for (const [k, v] of Object.entries(opts.metadata || {})) metadata.set(k, v);
  return new Promise((resolve, reject) => {
    const call = c[method](request, metadata, callOptions, (err, response) =>
      (err ? reject(err) : resolve(response)));
    if (opts.onCall) opts.onCall(call);
  });
}

async function expectCode(promise, code, what) {
  try {
    await promise;
  } catch (err) {
    if (err.code !== code) {
      throw new Error(`${what}: expected code ${code}, got ${err.code} (${err.details})`);
    }
    return err;
  }
  throw new Error(`${what}: expected code ${code}, got OK`);
}

function assert(cond, message) {
  if (!cond) throw new Error(message);
}
function assertEqual(actual, expected, what) {
  const a = JSON.stringify(actual);
  const e = JSON.stringify(expected);
  if (a !== e) throw new Error(`${what}: expected ${e}, got ${a}`);
}

// ---- Requests -----------------------------------------------------------------------------

function int32Bytes(values) {
  const b = Buffer.alloc(values.length * 4);
  values.forEach((v, i) => b.writeInt32LE(v, i * 4));
  return b;
}
function readInt32s(buffer) {
  const out = [];
  for (let i = 0; i < buffer.length; i += 4) out.push(buffer.readInt32LE(i));
  return out;
}

const A = Array.from({ length: 16 }, (_, i) => i);
const B = Array(16).fill(3);

function simpleRaw(a = A, b = B, extra = {}) {
  return {
    model_name: 'simple',
    inputs: [
      { name: 'INPUT0', datatype: 'INT32', shape: [1, 16] },
      { name: 'INPUT1', datatype: 'INT32', shape: [1, 16] },
    ],
    raw_input_contents: [int32Bytes(a), int32Bytes(b)],
    ...extra,
  };
}

function checkSimple(response, a = A, b = B) {
  assertEqual(response.outputs.map((o) => o.name), ['OUTPUT0', 'OUTPUT1'], 'output names');
  assertEqual(response.outputs[0].shape, [1, 16], 'OUTPUT0 shape');
  assertEqual(readInt32s(response.raw_output_contents[0]), a.map((x, i) => x + b[i]), 'OUTPUT0');
  assertEqual(readInt32s(response.raw_output_contents[1]), a.map((x, i) => x - b[i]), 'OUTPUT1');
}

async function goodRequestStillSucceeds(c) {
  checkSimple(await unary(c, 'ModelInfer', simpleRaw()));
}

// Per data type: three values, their raw bytes, and the typed contents field.
const DTYPES = {
  BOOL: { field: 'bool_contents', values: [true, false, true],
    raw: (v) => Buffer.from(v.map((x) => (x ? 1 : 0))) },
  UINT8: { field: 'uint_contents', values: [0, 7, 255], raw: (v) => Buffer.from(v) },
  UINT16: { field: 'uint_contents', values: [0, 7, 65535], raw: (v) => pack(v, 2, 'writeUInt16LE') },
  UINT32: { field: 'uint_contents', values: [0, 7, 4294967295], raw: (v) => pack(v, 4, 'writeUInt32LE') },
  UINT64: { field: 'uint64_contents', values: [0, 7, 2 ** 40],
    raw: (v) => pack(v.map(BigInt), 8, 'writeBigUInt64LE') },
  INT8: { field: 'int_contents', values: [-128, 7, 127], raw: (v) => pack(v, 1, 'writeInt8') },
  INT16: { field: 'int_contents', values: [-32768, 7, 32767], raw: (v) => pack(v, 2, 'writeInt16LE') },
  INT32: { field: 'int_contents', values: [-2147483648, 7, 2147483647], raw: (v) => pack(v, 4, 'writeInt32LE') },
  INT64: { field: 'int64_contents', values: [-(2 ** 40), 7, 2 ** 40],
    raw: (v) => pack(v.map(BigInt), 8, 'writeBigInt64LE') },
  FP16: { field: null, values: null, raw: () => Buffer.from([0x00, 0x3c, 0x00, 0xc0, 0x00, 0x00]) },
  BF16: { field: null, values: null, raw: () => Buffer.from([0x80, 0x3f, 0x00, 0xc0, 0x00, 0x00]) },
  FP32: { field: 'fp32_contents', values: [1.5, -2.25, 1e30], raw: (v) => pack(v, 4, 'writeFloatLE') },
  FP64: { field: 'fp64_contents', values: [1.5, -2.25, 1e300], raw: (v) => pack(v, 8, 'writeDoubleLE') },
  BYTES: { field: 'bytes_contents', values: [Buffer.from('a'), Buffer.from(''), Buffer.from('xyz\u00ff')],
    raw: (v) => Buffer.concat(v.flatMap((s) => { const n = Buffer.alloc(4); n.writeUInt32LE(s.length); return [n, s]; })) },
};
function pack(values, size, writer) {
  const b = Buffer.alloc(values.length * size);
  values.forEach((v, i) => b[writer](v, i * size));
  return b;
}

function identityRequest(dtype, form) {
  const t = DTYPES[dtype];
  const input = { name: 'INPUT0', datatype: dtype, shape: [1, 3] };
  const request = { model_name: `identity_${dtype.toLowerCase()}`, inputs: [input] };
  if (form === 'raw') {
    request.raw_input_contents = [t.raw(t.values)];
  } else {  // typed in, typed out
    input.contents = { [t.field ?? 'fp32_contents']: t.values ?? [1, 2, 3] };
    request.parameters = { typed_outputs: { bool_param: true } };
  }
  return request;
}

function statsOf(response) {
  const s = response.model_stats[0].inference_stats;
  return { success: s.success.count, fail: s.fail.count };
}

async function waitFor(predicate, timeoutMs, what) {
  const deadline = Date.now() + timeoutMs;
  while (Date.now() < deadline) {
    if (await predicate()) return;
    await sleep(50);
  }
  throw new Error(`timed out waiting for ${what}`);
}

// How long a slow run takes depends on the machine (ONNX Runtime's intra-op threads grow with
// the cores), so the tests on the `slow` model do not sleep and hope a run is still going: they
// wait until the server's own gauges (docs/metrics.md) show the state they need.

// One sample of the server's /metrics: `name` with the labels `labels` (model and version
// included), or throws.
async function metric(srv, name, labels) {
  const r = await fetch(`http://127.0.0.1:${await srv.metricsPort()}/metrics`);
  assertEqual(r.status, 200, 'GET /metrics');
  const want = Object.entries({ version: '1', ...labels });
  // Only this family's lines are parsed: the whole text holds every model's histograms.
  for (const line of (await r.text()).split('\n')) {
    if (!line.startsWith(`${name}{`)) continue;
    const m = /^(\w+)\{(.*)\} (\S+)$/.exec(line);
    if (!m) continue;
    const have = Object.fromEntries([...m[2].matchAll(/(\w+)="([^"]*)"/g)]
      .map((x) => [x[1], x[2]]));
    if (want.every(([k, v]) => have[k] === v) && Object.keys(have).length === want.length) {
      return Number(m[3]);
    }
  }
  throw new Error(`no ${name} ${JSON.stringify(labels)} in /metrics`);
}

// [requests in flight, requests queued] of `model`: in flight counts every admitted request not
// yet answered, queued or running, so with one instance in flight - queued is the one running.
async function modelRequests(srv, model) {
  return [await metric(srv, 'harrier_inflight_requests', { model }),
    await metric(srv, 'harrier_queue_depth', { model })];
}

// Waits until `model` has `inFlight` requests admitted and not answered, `queued` of them
// waiting. (A request is counted in flight a few microseconds before it is queued, so "running"
// may be seen that early: an idle instance takes it at once.)
async function waitForRequests(srv, model, inFlight, queued, timeoutMs = 30000) {
  const deadline = Date.now() + timeoutMs;
  let last;
  while (Date.now() < deadline) {
    last = await modelRequests(srv, model);
    if (last[0] === inFlight && last[1] === queued) return;
    await sleep(5);
  }
  throw new Error(`${model}: waited ${timeoutMs} ms for ${inFlight} requests in flight, ` +
    `${queued} of them queued; last seen [in flight, queued] = ${JSON.stringify(last)}`);
}

const stopped = (srv, stage) =>
  metric(srv, 'harrier_cancellations_total', { model: 'slow', stage });

// ---- Tests --------------------------------------------------------------------------------

let server;
let c;  // a client of the shared server
const tests = [];
const test = (name, fn) => tests.push({ name, fn });

test('ServerLive and ServerReady', async () => {
  assertEqual((await unary(c, 'ServerLive', {})).live, true, 'live');
  assertEqual((await unary(c, 'ServerReady', {})).ready, true, 'ready');
});

test('ModelReady: ready, unknown model, bad version', async () => {
  assertEqual((await unary(c, 'ModelReady', { name: 'simple' })).ready, true, 'simple');
  assertEqual((await unary(c, 'ModelReady', { name: 'simple', version: '1' })).ready, true, 'v1');
  await expectCode(unary(c, 'ModelReady', { name: 'nope' }), Code.NOT_FOUND, 'unknown model');
  await expectCode(unary(c, 'ModelReady', { name: 'simple', version: '7' }), Code.NOT_FOUND,
    'unknown version');
  await expectCode(unary(c, 'ModelReady', { name: 'simple', version: 'x' }),
    Code.INVALID_ARGUMENT, 'bad version');
});

test('ServerMetadata', async () => {
  const md = await unary(c, 'ServerMetadata', {});
  assertEqual(md.name, 'harrier', 'name');
  assert(md.version.length > 0, 'a version');
  for (const e of ['binary_tensor_data', 'classification', 'model_configuration', 'statistics',
    'model_repository', 'logging', 'system_shared_memory'])
    assert(md.extensions.includes(e), `extension ${e} in ${md.extensions}`);
});

// The REST API's answer, to check that gRPC says the same.
async function rest(target) {
  const r = await fetch(`http://127.0.0.1:${server.httpPort()}${target}`);
  assertEqual(r.status, 200, `GET ${target}`);
  return r.json();
}

// Triton's logging extension, as tritonclient's get_log_settings / update_log_settings call it.
test('LogSettings: read, changed, seen by REST, refused without a change', async () => {
  const value = (v) => v[v.parameter_choice];
  const read = await unary(c, 'LogSettings', {});
  const expected = await rest('/v2/logging');
  for (const [k, v] of Object.entries(expected)) assertEqual(value(read.settings[k]), v, k);
  const changed = await unary(c, 'LogSettings', { settings: { log_verbose_level: { uint32_param: 1 } } });
  assertEqual(value(changed.settings.log_verbose_level), 1, 'changed');
  assertEqual((await rest('/v2/logging')).log_verbose_level, 1, 'REST sees it');
  await expectCode(unary(c, 'LogSettings', { settings: { log_info: { string_param: 'yes' } } }),
    Code.INVALID_ARGUMENT, 'a string for a bool');
  await unary(c, 'LogSettings', { settings: { log_verbose_level: { uint32_param: 0 } } });
  assertEqual((await rest('/v2/logging')).log_verbose_level, 0, 'back to 0');
});

test('ModelMetadata: as the REST API', async () => {
  for (const name of ['simple', 'identity_bytes', 'slow']) {
    const md = await unary(c, 'ModelMetadata', { name });
    const expected = await rest(`/v2/models/${name}`);
    const specs = (list) => list.map((t) => ({ name: t.name, datatype: t.datatype, shape: t.shape }));
    assertEqual([md.name, md.versions, md.platform, specs(md.inputs), specs(md.outputs)],
      [expected.name, expected.versions, expected.platform, specs(expected.inputs),
        specs(expected.outputs)], `${name} metadata`);
  }
  assertEqual((await unary(c, 'ModelMetadata', { name: 'simple' })).inputs[0].name, 'INPUT0', 'INPUT0');
  await expectCode(unary(c, 'ModelMetadata', { name: 'nope' }), Code.NOT_FOUND, 'unknown');
});

test('ModelConfig: as the REST API', async () => {
  for (const name of ['simple', 'identity_fp16', 'slow']) {
    const { config } = await unary(c, 'ModelConfig', { name });
    const expected = await rest(`/v2/models/${name}/config`);
    assertEqual(config.name, name, 'name');
    assertEqual([config.platform, config.max_batch_size], [expected.platform, expected.max_batch_size],
      `${name} platform, max_batch_size`);
    assertEqual(config.input.map((t) => [t.name, t.data_type, t.dims]),
      expected.input.map((t) => [t.name, t.data_type, t.dims]), `${name} inputs`);
    assertEqual(config.output.map((t) => [t.name, t.data_type, t.dims]),
      expected.output.map((t) => [t.name, t.data_type, t.dims]), `${name} outputs`);
    assertEqual(config.instance_group.length, expected.instance_group.length, 'instance groups');
  }
  await expectCode(unary(c, 'ModelConfig', { name: 'nope' }), Code.NOT_FOUND, 'unknown');
});

test('ModelStatistics: one model, every model, unknown', async () => {
  await goodRequestStillSucceeds(c);
  const one = await unary(c, 'ModelStatistics', { name: 'simple' });
  assertEqual(one.model_stats.map((s) => [s.name, s.version]), [['simple', '1']], 'simple');
  assert(one.model_stats[0].inference_count >= 1, 'inference_count');
  assert(one.model_stats[0].inference_stats.success.count >= 1, 'success count');
  assert(one.model_stats[0].batch_stats.length >= 1, 'batch_stats');
  const all = await unary(c, 'ModelStatistics', {});
  assert(all.model_stats.length > 10, `every model: ${all.model_stats.length}`);
  await expectCode(unary(c, 'ModelStatistics', { name: 'nope' }), Code.NOT_FOUND, 'unknown');
});

test('RepositoryIndex', async () => {
  const all = await unary(c, 'RepositoryIndex', {});
  const simple = all.models.find((m) => m.name === 'simple');
  assertEqual([simple.version, simple.state], ['1', 'READY'], 'simple');
  const ready = await unary(c, 'RepositoryIndex', { ready: true });
  assert(ready.models.every((m) => m.state === 'READY'), 'ready only');
});

test('RepositoryModelLoad and Unload: UNAVAILABLE without --model-control-mode explicit', async () => {
  const e1 = await expectCode(unary(c, 'RepositoryModelLoad', { model_name: 'simple' }),
    Code.UNAVAILABLE, 'load');
  assert(/explicit model load \/ unload is not allowed/.test(e1.details), e1.details);
  await expectCode(unary(c, 'RepositoryModelUnload', { model_name: 'simple' }),
    Code.UNAVAILABLE, 'unload');
  await goodRequestStillSucceeds(c);
});

test('ModelInfer raw: outputs raw, id echoed, version', async () => {
  const r = await unary(c, 'ModelInfer', simpleRaw(A, B, { id: 'req-1' }));
  checkSimple(r);
  assertEqual([r.model_name, r.model_version, r.id], ['simple', '1', 'req-1'], 'header');
  assert(r.outputs.every((o) => !o.contents || o.contents.int_contents.length === 0),
    'no typed contents');
});

test('ModelInfer typed: outputs raw as Triton answers, typed when typed_outputs asks', async () => {
  const typed = (parameters) => ({
    model_name: 'simple', model_version: '1', parameters,
    inputs: [
      { name: 'INPUT0', datatype: 'INT32', shape: [1, 16], contents: { int_contents: A } },
      { name: 'INPUT1', datatype: 'INT32', shape: [1, 16], contents: { int_contents: B } },
    ],
  });
  checkSimple(await unary(c, 'ModelInfer', typed({})));
  const r = await unary(c, 'ModelInfer', typed({ typed_outputs: { bool_param: true } }));
  assertEqual(r.raw_output_contents.length, 0, 'no raw outputs');
  assertEqual(r.outputs[0].contents.int_contents, A.map((x, i) => x + B[i]), 'OUTPUT0');
  assertEqual(r.outputs[1].contents.int_contents, A.map((x, i) => x - B[i]), 'OUTPUT1');
});

for (const dtype of Object.keys(DTYPES)) {
  test(`every data type: ${dtype} raw`, async () => {
    const request = identityRequest(dtype, 'raw');
    const r = await unary(c, 'ModelInfer', request);
    assertEqual([r.outputs[0].datatype, r.outputs[0].shape], [dtype, [1, 3]], 'output');
    assert(r.raw_output_contents[0].equals(request.raw_input_contents[0]),
      `bytes ${r.raw_output_contents[0].toString('hex')}`);
  });
  test(`every data type: ${dtype} typed`, async () => {
    const t = DTYPES[dtype];
    if (!t.field) {  // FP16/BF16 have no typed form
      await expectCode(unary(c, 'ModelInfer', identityRequest(dtype, 'typed')),
        Code.INVALID_ARGUMENT, `${dtype} typed`);
      return;
    }
    const r = await unary(c, 'ModelInfer', identityRequest(dtype, 'typed'));
    const got = r.outputs[0].contents[t.field];
    const norm = (v) => (Buffer.isBuffer(v) ? v.toString('hex') : dtype === 'FP32' ? Math.fround(v) : v);
    assertEqual(got.map(norm), t.values.map(norm), `${dtype} values`);
  });
}

test('output subset and classification', async () => {
  const only1 = await unary(c, 'ModelInfer', simpleRaw(A, B, { outputs: [{ name: 'OUTPUT1' }] }));
  assertEqual(only1.outputs.map((o) => o.name), ['OUTPUT1'], 'subset');
  assertEqual(readInt32s(only1.raw_output_contents[0]), A.map((x, i) => x - B[i]), 'OUTPUT1');
  const top = await unary(c, 'ModelInfer', simpleRaw(A, B, {
    outputs: [{ name: 'OUTPUT0', parameters: { classification: { int64_param: 2 } } }],
  }));
  assertEqual(top.outputs[0].datatype, 'BYTES', 'classified');
  assertEqual(top.outputs[0].shape.at(-1), 2, 'top 2');
  const raw = top.raw_output_contents[0];
  const first = raw.subarray(4, 4 + raw.readUInt32LE(0)).toString();
  assert(/^18(\.0+)?:15$/.test(first), `top entry ${first}`);
});

test('request parameters: accepted and refused', async () => {
  checkSimple(await unary(c, 'ModelInfer', simpleRaw(A, B, {
    parameters: { timeout: { int64_param: 5000000 }, note: { string_param: 'x' },
      ratio: { double_param: 0.5 }, big: { uint64_param: 7 } },
  })));
  await expectCode(unary(c, 'ModelInfer', simpleRaw(A, B, {
    parameters: { big: { uint64_param: '18446744073709551615' } },
  })), Code.INVALID_ARGUMENT, 'uint64 over int64');
  await expectCode(unary(c, 'ModelInfer', simpleRaw(A, B, {
    parameters: { priority: { string_param: 'high' } },
  })), Code.INVALID_ARGUMENT, 'priority as a string');
  await goodRequestStillSucceeds(c);
});

// What Triton's clients do with compression_algorithm: every message compressed, the call's
// grpc-encoding naming how (grpc-js: grpc.default_compression_algorithm, 1 deflate, 2 gzip).
for (const [name, algorithm] of [['deflate', 1], ['gzip', 2]]) {
  test(`compressed messages (${name}): ModelInfer and ModelStreamInfer`, async () => {
    const options = { 'grpc.default_compression_algorithm': algorithm };
    const cc = client(await server.grpcPort(), undefined, options);
    try {
      checkSimple(await unary(cc, 'ModelInfer', simpleRaw(A, B, { id: `z-${name}` })));
      const call = cc.ModelStreamInfer();
      const got = [];
      const done = new Promise((resolve, reject) => {
        call.on('data', (r) => got.push(r));
        call.on('error', reject);
        call.on('end', resolve);
      });
      for (let i = 0; i < 5; i++) call.write(simpleRaw(A.map((x) => x + i), B, { id: String(i) }));
      call.end();
      await done;
      assertEqual(got.length, 5, 'responses');
      for (const r of got) {
        assertEqual(r.error_message, '', 'error_message');
        const i = Number(r.infer_response.id);
        checkSimple(r.infer_response, A.map((x) => x + i), B);
      }
    } finally {
      cc.close();
    }
  });
}

test('ModelStreamInfer: 1,000 requests, each answer matches its input; an error in between', async () => {
  const N = 1000;
  const call = c.ModelStreamInfer();
  const seen = new Map();
  let errorResponse = null;
  const errors = [];
  const done = new Promise((resolve, reject) => {
    call.on('data', (r) => {
      if (r.error_message) {
        if (r.infer_response.id === 'bad') errorResponse = r;
        else errors.push(`${r.infer_response.id}: ${r.error_message}`);
        return;
      }
      const i = Number(r.infer_response.id);
      const a = A.map((x) => x + i);
      checkSimple(r.infer_response, a, B);
      assert(!seen.has(i), `duplicate response ${i}`);
      seen.set(i, true);
    });
    call.on('error', reject);
    call.on('end', resolve);
  });
  for (let i = 0; i < N; i++) {
    call.write(simpleRaw(A.map((x) => x + i), B, { id: String(i) }));
    if (i === N / 2) call.write({ model_name: 'nope', id: 'bad', inputs: [] });
  }
  call.end();
  await done;
  assertEqual(errors.slice(0, 3), [], 'errors');
  assertEqual(seen.size, N, 'responses');
  assert(errorResponse && errorResponse.infer_response.id === 'bad' &&
    /unknown model/.test(errorResponse.error_message), `error response ${JSON.stringify(errorResponse)}`);
});

test('ModelStreamInfer on a model that generates text: decoupled responses, then a final one', async () => {
  const textRequest = (id, prompt, maxTokens) => ({
    model_name: 'tiny-llama', id,
    inputs: [{ name: 'text_input', datatype: 'BYTES', shape: [1],
      contents: { bytes_contents: [Buffer.from(prompt)] } }],
    parameters: { max_tokens: { int64_param: maxTokens }, temperature: { double_param: 0 } },
  });
  const collect = (requests) => new Promise((resolve, reject) => {
    const call = c.ModelStreamInfer();
    const byId = new Map();
    call.on('data', (r) => {
      const id = r.infer_response.id;
      if (!byId.has(id)) byId.set(id, { text: '', responses: 0, final: 0, error: '' });
      const e = byId.get(id);
      e.responses++;
      if (r.error_message) e.error = r.error_message;
      if (r.infer_response.parameters?.triton_final_response?.bool_param) e.final++;
      for (const raw of r.infer_response.raw_output_contents) {
        const n = raw.readUInt32LE(0);
        e.text += raw.subarray(4, 4 + n).toString('utf8');
      }
    });
    call.on('error', reject);
    call.on('end', () => resolve(byId));
    for (const r of requests) call.write(r);
    call.end();
  });
  const got = await collect([textRequest('a', 'Once upon a time', 6),
    textRequest('b', 'The quick brown fox', 4)]);
  for (const [id, tokens] of [['a', 6], ['b', 4]]) {
    const e = got.get(id);
    assert(e && !e.error, `${id}: ${JSON.stringify(e)}`);
    assertEqual(e.final, 1, `${id}: final responses`);
    assert(e.responses >= 2 && e.responses <= tokens + 1, `${id}: ${e.responses} responses`);
  }
  // The same text as the REST generate endpoint's, greedy.
  const r = await fetch(`http://127.0.0.1:${server.httpPort()}/v2/models/tiny-llama/generate`, {
    method: 'POST', body: JSON.stringify({ text_input: 'Once upon a time',
      parameters: { max_tokens: 6, temperature: 0 } }) });
  assertEqual(got.get('a').text, (await r.json()).text_output, 'text as over REST');
  // A request without text_input: an error response, and the stream goes on.
  const bad = await collect([{ model_name: 'tiny-llama', id: 'x', inputs: [] }]);
  assert(/text_input/.test(bad.get('x').error), `error ${JSON.stringify(bad.get('x'))}`);
  // Sampled with a seed and the default top_k/min_p: the same text as REST's for the same
  // parameters (one parser reads both, with the same defaults).
  const seeded = { ...textRequest('s', 'Once upon a time', 6),
    parameters: { max_tokens: { int64_param: 6 }, temperature: { double_param: 0.9 },
      seed: { int64_param: 42 } } };
  const sampled = await collect([seeded]);
  assert(!sampled.get('s').error, `seeded: ${JSON.stringify(sampled.get('s'))}`);
  const rest = await fetch(`http://127.0.0.1:${server.httpPort()}/v2/models/tiny-llama/generate`, {
    method: 'POST', body: JSON.stringify({ text_input: 'Once upon a time',
      parameters: { max_tokens: 6, temperature: 0.9, seed: 42 } }) });
  assertEqual(sampled.get('s').text, (await rest.json()).text_output, 'seeded text as over REST');
  // Parameters out of their ranges are refused by name, as over REST.
  const wrong = await collect([
    { ...textRequest('w1', 'x', 1), parameters: { max_tokens: { double_param: 1e30 } } },
    { ...textRequest('w2', 'x', 1), parameters: { temperature: { double_param: -1 } } },
    { ...textRequest('w3', 'x', 1), parameters: { stop: { string_param: 'x'.repeat(5000) } } }]);
  assert(/max_tokens/.test(wrong.get('w1').error), `w1 ${JSON.stringify(wrong.get('w1'))}`);
  assert(/temperature/.test(wrong.get('w2').error), `w2 ${JSON.stringify(wrong.get('w2'))}`);
  assert(/stop/.test(wrong.get('w3').error), `w3 ${JSON.stringify(wrong.get('w3'))}`);
  // Each refusal ends its request as every generation ends, with the final flag (a client that
  // waits for it per id waited for good).
  for (const id of ['w1', 'w2', 'w3']) assertEqual(wrong.get(id).final, 1, `${id}: final`);
  // So does a refusal before the model is known to generate: an unknown model or version.
  const unknown = await collect([{ ...textRequest('u1', 'x', 1), model_name: 'no-such-model' },
    { ...textRequest('u2', 'x', 1), model_version: '7' }]);
  for (const id of ['u1', 'u2']) {
    const e = unknown.get(id);
    assert(e && /unknown model/.test(e.error) && e.final === 1 && e.responses === 1,
      `${id}: ${JSON.stringify(e)}`);
  }
  // NaN has no JSON spelling: it is refused as what it is, not as "a string".
  const nan = await collect([
    { ...textRequest('n1', 'x', 1), parameters: { temperature: { double_param: NaN } } },
    { ...textRequest('n2', 'x', 1), parameters: { top_p: { double_param: Infinity } } }]);
  assert(/'parameters.temperature' must be a finite number, got nan/.test(nan.get('n1').error),
    `n1 ${JSON.stringify(nan.get('n1'))}`);
  assert(/'parameters.top_p' must be a finite number, got inf/.test(nan.get('n2').error),
    `n2 ${JSON.stringify(nan.get('n2'))}`);
  // One prompt per request, as over REST: a second one is refused, never dropped unseen.
  const prompts = (id, shape, texts) => ({ ...textRequest(id, 'x', 1),
    inputs: [{ name: 'text_input', datatype: 'BYTES', shape,
      contents: { bytes_contents: texts.map((t) => Buffer.from(t)) } }] });
  const several = await collect([prompts('p1', [2], ['Hello', 'Goodbye']),
    prompts('p2', [1, 2], ['Hello', 'Goodbye']), prompts('p3', [1], ['Hello', 'Goodbye']),
    prompts('p4', [1, 1], ['Hello'])]);
  assert(/shape \[2\]: this server takes one prompt/.test(several.get('p1').error),
    `p1 ${JSON.stringify(several.get('p1'))}`);
  assert(/shape \[1,2\]/.test(several.get('p2').error), `p2 ${JSON.stringify(several.get('p2'))}`);
  assert(/holds 2 elements/.test(several.get('p3').error), `p3 ${JSON.stringify(several.get('p3'))}`);
  assert(!several.get('p4').error && several.get('p4').final === 1,
    `p4 (a batch dimension of 1) ${JSON.stringify(several.get('p4'))}`);
  // A prompt named in shared memory is refused as such, not read as no data at all.
  const shm = await collect([{ ...textRequest('m1', 'x', 1),
    inputs: [{ name: 'text_input', datatype: 'BYTES', shape: [1], parameters: {
      shared_memory_region: { string_param: 'r' },
      shared_memory_byte_size: { int64_param: 9 } } }] }]);
  assert(/'text_input' cannot be read from shared memory/.test(shm.get('m1').error),
    `m1 ${JSON.stringify(shm.get('m1'))}`);
});

const slowRequest = () => ({
  model_name: 'slow',
  inputs: [{ name: 'INPUT0', datatype: 'FP32', shape: [1, 1024] }],
  raw_input_contents: [Buffer.alloc(4096)],
});

test('a call cancelled mid-flight is cancelled in the server', async () => {
  const before = statsOf(await unary(c, 'ModelStatistics', { name: 'slow' }));
  const running = await stopped(server, 'running');
  let call;
  const pending = unary(c, 'ModelInfer', slowRequest(), { onCall: (x) => { call = x; } });
  await waitForRequests(server, 'slow', 1, 0);  // running
  call.cancel();
  await expectCode(pending, Code.CANCELLED, 'cancelled call');
  await waitFor(async () => statsOf(await unary(c, 'ModelStatistics', { name: 'slow' })).fail >
    before.fail, 10000, 'the server to count the cancelled request as failed');
  const after = statsOf(await unary(c, 'ModelStatistics', { name: 'slow' }));
  assertEqual(after.success, before.success, 'no success for the cancelled request');
  assertEqual(await stopped(server, 'running') - running, 1, 'executions stopped');
  await goodRequestStillSucceeds(c);
});

test('a stream cancelled mid-flight: its requests are cancelled in the server', async () => {
  const before = statsOf(await unary(c, 'ModelStatistics', { name: 'slow' }));
  const call = c.ModelStreamInfer();
  const ended = new Promise((resolve) => {
    call.on('data', () => {});
    call.on('error', resolve);
    call.on('end', () => resolve(null));
  });
  const running = await stopped(server, 'running');
  const queued = await stopped(server, 'queued');
  call.write({ ...slowRequest(), id: 's1' });
  call.write({ ...slowRequest(), id: 's2' });
  await waitForRequests(server, 'slow', 2, 1);  // s1 running, s2 queued behind it
  call.cancel();
  const err = await ended;
  assert(err && err.code === Code.CANCELLED, `stream ended with ${err && err.code}`);
  await waitFor(async () => statsOf(await unary(c, 'ModelStatistics', { name: 'slow' })).fail >=
    before.fail + 2, 10000, 'both requests of the stream to be counted as failed');
  assertEqual(statsOf(await unary(c, 'ModelStatistics', { name: 'slow' })).success,
    before.success, 'no success for the cancelled stream');
  assertEqual([await stopped(server, 'running') - running, await stopped(server, 'queued') - queued],
    [1, 1], 'cancellations [running, queued]');
  await goodRequestStillSucceeds(c);
});

// A message that does not parse ends the stream with INTERNAL, but only after the requests the
// stream took before it are answered: they are not cancelled (docs/grpc.md, "Streaming"). Sent
// as raw bytes: two requests to the slow model (one running, one queued), then garbage.
test('a message that does not parse ends the stream after the requests before it are answered', async () => {
  const method = Service.service.ModelStreamInfer;
  const call = c.makeBidiStreamRequest(method.path, (b) => b, method.responseDeserialize);
  const answers = [];
  const ended = new Promise((resolve) => {
    call.on('data', (r) => answers.push(r));
    call.on('error', resolve);
    call.on('end', () => resolve(null));
  });
  call.write(method.requestSerialize({ ...slowRequest(), id: 'r1' }));
  call.write(method.requestSerialize({ ...slowRequest(), id: 'r2' }));
  await waitForRequests(server, 'slow', 2, 1);  // r1 running, r2 queued behind it
  call.write(Buffer.from([0xff, 0xff, 0xff, 0xff]));
  const err = await ended;
  assert(err && err.code === Code.INTERNAL && /cannot parse/.test(err.details),
    `stream ended with ${err && err.code}: ${err && err.details}`);
  assertEqual(answers.map((r) => [r.infer_response.id, r.error_message]),
    [['r1', ''], ['r2', '']], 'the requests before the bad message, answered');
  await goodRequestStillSucceeds(c);
});

test('a deadline that expires: DEADLINE_EXCEEDED, and the server stops the work', async () => {
  // A deadline well inside one run: a fifth of a measured one, at most 150 ms.
  const start = Date.now();
  await unary(c, 'ModelInfer', slowRequest());
  const deadlineMs = Math.max(1, Math.min(150, Math.floor((Date.now() - start) / 5)));
  const before = statsOf(await unary(c, 'ModelStatistics', { name: 'slow' }));
  await expectCode(unary(c, 'ModelInfer', slowRequest(), { deadlineMs }),
    Code.DEADLINE_EXCEEDED, `deadline of ${deadlineMs} ms`);
  await waitFor(async () => statsOf(await unary(c, 'ModelStatistics', { name: 'slow' })).fail >
    before.fail, 10000, 'the server to count the expired request as failed');
  assertEqual(statsOf(await unary(c, 'ModelStatistics', { name: 'slow' })).success,
    before.success, 'no success for the expired request');
  await goodRequestStillSucceeds(c);
});

test('a deadline that is met', async () => {
  checkSimple(await unary(c, 'ModelInfer', simpleRaw(), { deadlineMs: 10000 }));
});

const BAD_INPUTS = [
  ['wrong dtype', Code.INVALID_ARGUMENT, () => {
    const r = simpleRaw();
    r.inputs[0].datatype = 'FP32';
    return r;
  }],
  ['wrong shape', Code.INVALID_ARGUMENT, () => {
    const r = simpleRaw(A.slice(0, 15));
    r.inputs[0].shape = [1, 15];
    return r;
  }],
  ['raw contents of the wrong size', Code.INVALID_ARGUMENT, () => {
    const r = simpleRaw();
    r.raw_input_contents[1] = Buffer.alloc(60);
    return r;
  }],
  ['fewer raw contents than inputs', Code.INVALID_ARGUMENT, () => {
    const r = simpleRaw();
    r.raw_input_contents.pop();
    return r;
  }],
  ['raw and typed mixed', Code.INVALID_ARGUMENT, () => {
    const r = simpleRaw();
    r.inputs[0].contents = { int_contents: A };
    return r;
  }],
  ['typed contents in the wrong field', Code.INVALID_ARGUMENT, () => ({
    model_name: 'simple',
    inputs: [
      { name: 'INPUT0', datatype: 'INT32', shape: [1, 16], contents: { fp32_contents: A } },
      { name: 'INPUT1', datatype: 'INT32', shape: [1, 16], contents: { int_contents: B } },
    ],
  })],
  ['a typed value out of range', Code.INVALID_ARGUMENT, () => ({
    model_name: 'identity_uint8',
    inputs: [{ name: 'INPUT0', datatype: 'UINT8', shape: [1, 1], contents: { uint_contents: [256] } }],
  })],
  ['malformed BYTES raw contents', Code.INVALID_ARGUMENT, () => ({
    model_name: 'identity_bytes',
    inputs: [{ name: 'INPUT0', datatype: 'BYTES', shape: [1, 1] }],
    raw_input_contents: [Buffer.from([9, 0, 0, 0, 1])],
  })],
  ['an unknown datatype', Code.INVALID_ARGUMENT, () => {
    const r = simpleRaw();
    r.inputs[0].datatype = 'INT33';
    return r;
  }],
  ['a missing input', Code.INVALID_ARGUMENT, () => {
    const r = simpleRaw();
    r.inputs.pop();
    r.raw_input_contents.pop();
    return r;
  }],
  ['an unknown output', Code.INVALID_ARGUMENT, () => simpleRaw(A, B, { outputs: [{ name: 'NOPE' }] })],
  ['an unknown model', Code.NOT_FOUND, () => simpleRaw(A, B, { model_name: 'nope' })],
  ['an unknown version', Code.NOT_FOUND, () => simpleRaw(A, B, { model_version: '9' })],
  ['a bad version', Code.INVALID_ARGUMENT, () => simpleRaw(A, B, { model_version: '-1' })],
  ['a shape claim over the element limit', Code.RESOURCE_EXHAUSTED, () => {
    const r = simpleRaw();
    r.inputs[0].shape = [1 << 20, 1 << 20];
    return r;
  }],
  ['a message over --max-body-bytes', Code.RESOURCE_EXHAUSTED, () => {
    const r = simpleRaw();
    r.raw_input_contents[0] = Buffer.alloc(MAX_BODY_BYTES + 1024);
    return r;
  }],
];
for (const [name, code, make] of BAD_INPUTS) {
  test(`bad input: ${name}`, async () => {
    await expectCode(unary(c, 'ModelInfer', make()), code, name);
    await goodRequestStillSucceeds(c);
  });
}

// ---- System shared memory (Triton's extension; the server runs with --allow-client-shm) -----

// A POSIX shared-memory object of `size` zero bytes (/dev/shm/<name>, shm_open's "/<name>").
function shmObject(tag, size) {
  const name = `harrier_grpc_${process.pid}_${tag}`;
  fs.writeFileSync(`/dev/shm/${name}`, Buffer.alloc(size));
  return { key: `/${name}`, file: `/dev/shm/${name}` };
}
const shmParams = (region, size, offset = 0) => ({
  shared_memory_region: { string_param: region },
  shared_memory_byte_size: { int64_param: size },
  ...(offset ? { shared_memory_offset: { int64_param: offset } } : {}),
});

test('system shared memory: register, status, unregister; CUDA refused', async () => {
  const obj = shmObject('status', 256);
  try {
    await unary(c, 'SystemSharedMemoryUnregister', {});
    await unary(c, 'SystemSharedMemoryRegister',
      { name: 'g1', key: obj.key, offset: 8, byte_size: 128 });
    const all = await unary(c, 'SystemSharedMemoryStatus', {});
    assertEqual(all.regions.g1, { name: 'g1', key: obj.key, offset: 8, byte_size: 128 }, 'status');
    assertEqual(await rest('/v2/systemsharedmemory/status'),
      [{ name: 'g1', key: obj.key, offset: 8, byte_size: 128 }], 'REST sees it');
    const dup = await expectCode(unary(c, 'SystemSharedMemoryRegister',
      { name: 'g1', key: obj.key, byte_size: 8 }), Code.INVALID_ARGUMENT, 'twice');
    assert(dup.details.includes("shared memory region 'g1' already in manager"), dup.details);
    const out = await expectCode(unary(c, 'SystemSharedMemoryRegister',
      { name: 'g2', key: obj.key, offset: 200, byte_size: 57 }), Code.INVALID_ARGUMENT, 'outside');
    assert(out.details.includes("failed to register shared memory region 'g2': invalid args"),
      out.details);
    await expectCode(unary(c, 'SystemSharedMemoryRegister',
      { name: 'g2', key: '/harrier_no_such_key', byte_size: 8 }), Code.INVALID_ARGUMENT, 'no key');
    await expectCode(unary(c, 'SystemSharedMemoryStatus', { name: 'g2' }),
      Code.INVALID_ARGUMENT, 'status of an unknown region');
    assertEqual(Object.keys((await unary(c, 'SystemSharedMemoryStatus', {})).regions), ['g1'],
      'nothing changed');
    await unary(c, 'SystemSharedMemoryUnregister', { name: 'g1' });
    await unary(c, 'SystemSharedMemoryUnregister', { name: 'g1' });  // twice: nothing to do
    assertEqual((await unary(c, 'SystemSharedMemoryStatus', {})).regions, {}, 'all gone');

    const cuda = await expectCode(unary(c, 'CudaSharedMemoryRegister',
      { name: 'gpu', raw_handle: Buffer.alloc(64), device_id: 0, byte_size: 8 }),
    Code.INVALID_ARGUMENT, 'CUDA register');
    assert(cuda.details.includes('CUDA shared memory is not supported on this server (no GPU)'),
      cuda.details);
    assertEqual((await unary(c, 'CudaSharedMemoryStatus', {})).regions, {}, 'CUDA status');
    await unary(c, 'CudaSharedMemoryUnregister', {});
    const md = await unary(c, 'ServerMetadata', {});
    assert(md.extensions.includes('system_shared_memory'), `extensions ${md.extensions}`);
  } finally {
    fs.rmSync(obj.file, { force: true });
  }
});

test('system shared memory: ModelInfer reads inputs from and writes outputs to regions', async () => {
  const input = shmObject('in', 128);
  const output = shmObject('out', 128);
  try {
    const bytes = Buffer.concat([int32Bytes(A), int32Bytes(B)]);
    const fd = fs.openSync(input.file, 'r+');
    fs.writeSync(fd, bytes, 0, bytes.length, 0);
    fs.closeSync(fd);
    await unary(c, 'SystemSharedMemoryRegister', { name: 'in', key: input.key, byte_size: 128 });
    await unary(c, 'SystemSharedMemoryRegister', { name: 'out', key: output.key, byte_size: 128 });
    // Both inputs in one region, both outputs in the other: Triton's simple_grpc_shm_client.
    const request = {
      model_name: 'simple',
      inputs: [
        { name: 'INPUT0', datatype: 'INT32', shape: [1, 16], parameters: shmParams('in', 64) },
        { name: 'INPUT1', datatype: 'INT32', shape: [1, 16], parameters: shmParams('in', 64, 64) },
      ],
      outputs: [
        { name: 'OUTPUT0', parameters: shmParams('out', 64) },
        { name: 'OUTPUT1', parameters: shmParams('out', 64, 64) },
      ],
    };
    const r = await unary(c, 'ModelInfer', request);
    assertEqual(r.outputs.map((o) => [o.name, o.datatype, o.shape]),
      [['OUTPUT0', 'INT32', [1, 16]], ['OUTPUT1', 'INT32', [1, 16]]], 'output metadata');
    assertEqual(r.raw_output_contents.map((b) => b.length), [0, 0], 'no data in the message');
    const written = readInt32s(fs.readFileSync(output.file));
    assertEqual(written.slice(0, 16), A.map((x, i) => x + B[i]), 'OUTPUT0 in the region');
    assertEqual(written.slice(16), A.map((x, i) => x - B[i]), 'OUTPUT1 in the region');

    // Mixed: INPUT1 raw (the only raw_input_contents entry), OUTPUT1 in the message.
    const mixed = {
      model_name: 'simple',
      inputs: [request.inputs[0], { name: 'INPUT1', datatype: 'INT32', shape: [1, 16] }],
      raw_input_contents: [int32Bytes(Array(16).fill(10))],
      outputs: [request.outputs[0], { name: 'OUTPUT1' }],
    };
    fs.writeFileSync(output.file, Buffer.alloc(128));
    const m = await unary(c, 'ModelInfer', mixed);
    assertEqual(m.raw_output_contents[0].length, 0, 'OUTPUT0 not in the message');
    assertEqual(readInt32s(m.raw_output_contents[1]), A.map((x) => x - 10), 'OUTPUT1 raw');
    assertEqual(readInt32s(fs.readFileSync(output.file)).slice(0, 16), A.map((x) => x + 10),
      'OUTPUT0 in the region');

    // Bad input: a clear INVALID_ARGUMENT each, and the server keeps serving.
    const bad = [
      ['a byte size that does not match', (q) => { q.inputs[0].parameters = shmParams('in', 32); },
        "input byte size mismatch for input 'INPUT0' for model 'simple'. Expected 64, got 32"],
      ['an unknown region', (q) => { q.inputs[1].parameters = shmParams('nope', 64); },
        "Unable to find shared memory region: 'nope'"],
      ['a span outside the region', (q) => { q.inputs[1].parameters = shmParams('in', 64, 100); },
        "Invalid offset + byte size for shared memory region: 'in'"],
      ['an output region too small', (q) => { q.outputs[1].parameters = shmParams('out', 16, 64); },
        "shared memory size specified with the request for output 'OUTPUT1' (16 bytes) should " +
        'be at least 64 bytes to hold the results'],
    ];
    for (const [what, change, message] of bad) {
      const q = structuredClone(request);
      change(q);
      const err = await expectCode(unary(c, 'ModelInfer', q), Code.INVALID_ARGUMENT, what);
      assert(err.details.includes(message), `${what}: ${err.details}`);
    }
    await goodRequestStillSucceeds(c);
  } finally {
    await unary(c, 'SystemSharedMemoryUnregister', {});
    fs.rmSync(input.file, { force: true });
    fs.rmSync(output.file, { force: true });
  }
});

test('TLS: a TLS client is served, a plaintext one is not', async () => {
  const dir = path.join(WORK, 'tls');
  fs.mkdirSync(dir, { recursive: true });
  const key = path.join(dir, 'key.pem');
  const cert = path.join(dir, 'cert.pem');
  const made = spawnSync('openssl', ['req', '-x509', '-newkey', 'rsa:2048', '-nodes', '-keyout', key,
    '-out', cert, '-days', '1', '-subj', '/CN=localhost', '-addext', 'subjectAltName=IP:127.0.0.1,DNS:localhost']);
  assert(made.status === 0, `openssl: ${made.stderr}`);
  const tls = new Harrier('harrier-tls', ['--tls-cert', cert, '--tls-key', key, '--https-port', '0']);
  try {
    const port = await tls.grpcPort();
    assert(/listening on gRPC \S+ \(TLS/.test(tls.log), 'log says TLS');
    const secure = client(port, grpc.credentials.createSsl(fs.readFileSync(cert)),
      { 'grpc.ssl_target_name_override': 'localhost' });
    assertEqual((await unary(secure, 'ServerLive', {})).live, true, 'live over TLS');
    checkSimple(await unary(secure, 'ModelInfer', simpleRaw()));
    secure.close();
    const plain = client(port);
    await expectCode(unary(plain, 'ServerLive', {}, { deadlineMs: 3000 }), Code.UNAVAILABLE,
      'plaintext client on the TLS port');
    plain.close();
  } finally {
    const { code } = await tls.stop();
    assertEqual(code, 0, 'exit status');
  }
});

// An OTLP/HTTP JSON receiver on a free port: every exported span, flattened.
async function otlpReceiver() {
  const spans = [];
  const httpServer = http.createServer((req, res) => {
    const chunks = [];
    req.on('data', (d) => chunks.push(d));
    req.on('end', () => {
      const body = JSON.parse(Buffer.concat(chunks).toString());
      for (const rs of body.resourceSpans || []) {
        for (const ss of rs.scopeSpans || []) spans.push(...(ss.spans || []));
      }
      res.writeHead(200, { 'Content-Type': 'application/json' });
      res.end('{}');
    });
  });
  await new Promise((resolve) => httpServer.listen(0, '127.0.0.1', resolve));
  return { spans, url: `http://127.0.0.1:${httpServer.address().port}/v1/traces`, httpServer };
}

test('tracing: traceparent metadata joins the trace, traceresponse answers, spans are exported', async () => {
  const receiver = await otlpReceiver();
  const traced = new Harrier('harrier-tracing', ['--trace-endpoint', receiver.url,
    '--trace-sample-ratio', '0', '--trace-export-interval-ms', '100']);
  try {
    const tc = client(await traced.grpcPort());
    const traceId = '4bf92f3577b34da6a3ce929d0e0e4736';
    const parentId = '00f067aa0ba902b7';
    let initial = null;
    checkSimple(await unary(tc, 'ModelInfer', simpleRaw(), {
      metadata: { traceparent: `00-${traceId}-${parentId}-01`, tracestate: 'vendor=grpc' },
      onCall: (call) => call.on('metadata', (m) => { initial = m; }),
    }));
    const answered = initial && initial.get('traceresponse')[0];
    assert(answered && answered.startsWith(`00-${traceId}-`) && answered.endsWith('-01'),
      `traceresponse: ${answered}`);
    const serverSpanId = answered.split('-')[2];
    // Not sampled by its parent: answered, not exported (checked after the sampled ones arrive).
    const unsampledId = 'aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa';
    checkSimple(await unary(tc, 'ModelInfer', simpleRaw(), {
      metadata: { traceparent: `00-${unsampledId}-${parentId}-00` } }));
    // A stream: each request is a span of its own under the stream's traceparent.
    const streamTraceId = '0af7651916cd43dd8448eb211c80319c';
    const md = new grpc.Metadata();
    md.set('traceparent', `00-${streamTraceId}-b7ad6b7169203331-01`);
    const call = tc.ModelStreamInfer(md);
    const got = new Promise((resolve, reject) => {
      let n = 0;
      call.on('data', () => { if (++n === 2) { call.end(); resolve(); } });
      call.on('error', reject);
    });
    call.write(simpleRaw());
    call.write(simpleRaw());
    await got;
    tc.close();

    const stages = ['receive', 'decode', 'queue', 'batch', 'infer', 'encode', 'send'];
    await waitFor(() => receiver.spans.filter((s) => s.traceId === streamTraceId &&
      s.name === 'ModelStreamInfer').length === 2 &&
      receiver.spans.some((s) => s.spanId === serverSpanId), 10000, 'spans exported');
    const serverSpan = receiver.spans.find((s) => s.spanId === serverSpanId);
    assertEqual(serverSpan.name, 'ModelInfer', 'server span name');
    assertEqual(serverSpan.traceId, traceId, 'trace id');
    assertEqual(serverSpan.parentSpanId, parentId, 'parent span');
    assertEqual(serverSpan.traceState, 'vendor=grpc', 'tracestate');
    assertEqual(serverSpan.kind, 2, 'SERVER kind');
    const attrs = Object.fromEntries(serverSpan.attributes.map((a) => [a.key, a.value]));
    assertEqual(attrs['rpc.system'].stringValue, 'grpc', 'rpc.system');
    assertEqual(attrs['harrier.model'].stringValue, 'simple', 'model attribute');
    const children = receiver.spans.filter((s) => s.traceId === traceId && s.spanId !== serverSpanId);
    assertEqual(children.map((s) => s.name).sort(), [...stages].sort(), 'stage spans');
    const batch = children.find((s) => s.name === 'batch');
    for (const s of children) {
      assertEqual(s.parentSpanId, s.name === 'infer' ? batch.spanId : serverSpanId, `${s.name}'s parent`);
      assert(BigInt(s.startTimeUnixNano) >= BigInt(serverSpan.startTimeUnixNano) &&
        BigInt(s.endTimeUnixNano) <= BigInt(serverSpan.endTimeUnixNano), `${s.name} within the server span`);
    }
    for (const s of receiver.spans.filter((x) => x.name === 'ModelStreamInfer')) {
      assertEqual(s.parentSpanId, 'b7ad6b7169203331', 'stream request span parent');
    }
    assert(!receiver.spans.some((s) => s.traceId === unsampledId), 'an unsampled parent is not exported');
  } finally {
    const { code } = await traced.stop();
    receiver.httpServer.close();
    assertEqual(code, 0, 'exit status');
  }
});

test('mutual TLS: a client certificate signed by --tls-client-ca is required', async () => {
  const dir = path.join(WORK, 'mtls');
  fs.mkdirSync(dir, { recursive: true });
  const f = (name) => path.join(dir, name);
  const openssl = (...a) => {
    const r = spawnSync('openssl', a);
    assert(r.status === 0, `openssl ${a[0]}: ${r.stderr}`);
  };
  openssl('req', '-x509', '-newkey', 'rsa:2048', '-nodes', '-keyout', f('server.key'), '-out',
    f('server.pem'), '-days', '1', '-subj', '/CN=localhost', '-addext', 'subjectAltName=DNS:localhost');
  openssl('req', '-x509', '-newkey', 'rsa:2048', '-nodes', '-keyout', f('ca.key'), '-out',
    f('ca.pem'), '-days', '1', '-subj', '/CN=harrier-test-ca');
  openssl('req', '-newkey', 'rsa:2048', '-nodes', '-keyout', f('client.key'), '-out',
    f('client.csr'), '-subj', '/CN=client');
  openssl('x509', '-req', '-in', f('client.csr'), '-CA', f('ca.pem'), '-CAkey', f('ca.key'),
    '-CAcreateserial', '-out', f('client.pem'), '-days', '1');
  const mtls = new Harrier('harrier-mtls', ['--tls-cert', f('server.pem'), '--tls-key',
    f('server.key'), '--tls-client-ca', f('ca.pem'), '--https-port', '0']);
  const options = { 'grpc.ssl_target_name_override': 'localhost' };
  try {
    const port = await mtls.grpcPort();
    const root = fs.readFileSync(f('server.pem'));
    const withCert = client(port, grpc.credentials.createSsl(root, fs.readFileSync(f('client.key')),
      fs.readFileSync(f('client.pem'))), options);
    checkSimple(await unary(withCert, 'ModelInfer', simpleRaw()));
    withCert.close();
    const withoutCert = client(port, grpc.credentials.createSsl(root), options);
    await expectCode(unary(withoutCert, 'ServerLive', {}, { deadlineMs: 3000 }), Code.UNAVAILABLE,
      'a TLS client without a certificate');
    withoutCert.close();
  } finally {
    const { code } = await mtls.stop();
    assertEqual(code, 0, 'exit status');
  }
});

test('SIGTERM: calls in flight (running and queued) complete, then the server exits 0', async () => {
  const own = new Harrier('harrier-sigterm');
  const port = await own.grpcPort();
  const oc = client(port);
  try {
    let signalled = false;
    const answeredAfterSignal = [];
    const pending = [0, 1].map((k) => unary(oc, 'ModelInfer', slowRequest()).then((r) => {
      answeredAfterSignal[k] = signalled;
      return r;
    }));
    await waitForRequests(own, 'slow', 2, 1);  // one running, one queued behind it
    signalled = true;
    own.proc.kill('SIGTERM');
    for (const [k, r] of (await Promise.all(pending)).entries()) {
      assertEqual([r.outputs[0].name, r.outputs[0].shape], ['OUTPUT0', [1, 1024]],
        `call ${k} answered`);
      assert(r.raw_output_contents[0].equals(Buffer.alloc(4096)), `call ${k}: output not zeros`);
    }
    assertEqual(answeredAfterSignal, [true, true], 'calls answered after the signal');
    const { code } = await own.exited;
    assertEqual(code, 0, 'exit status');
  } finally {
    oc.close();
    await own.stop('SIGKILL');
  }
});

// ---- Runner -------------------------------------------------------------------------------

function buildRepository() {
  fs.rmSync(REPO, { recursive: true, force: true });
  fs.mkdirSync(REPO, { recursive: true });
  for (const script of ['make_test_models.py', 'make_example_models.py']) {
    const r = spawnSync('/usr/bin/python3', [path.join(SRC, 'tools', script), REPO],
      { stdio: ['ignore', 'ignore', 'inherit'] });
    if (r.status !== 0) throw new Error(`${script} failed`);
  }
  // A text generator, for ModelStreamInfer's decoupled responses.
  fs.mkdirSync(path.join(REPO, 'tiny-llama', '1'), { recursive: true });
  fs.copyFileSync(path.join(SRC, '..', 'shared', 'models', 'llama-2-tiny-random.gguf'),
    path.join(REPO, 'tiny-llama', '1', 'model.gguf'));
}

async function main() {
  fs.mkdirSync(WORK, { recursive: true });
  let passed = 0;
  let failed = 0;
  try {
    buildRepository();
    // Overload protection off: the stream test keeps 64 requests of one stream in flight, which
    // it would rightly shed as overload on a busy machine; admission is tested elsewhere.
    server = new Harrier('harrier', ['--overload-protection', 'off', '--allow-client-shm', 'true']);
    c = client(await server.grpcPort());
  } catch (err) {
    console.log(`setup failed: ${err.message}`);
    if (server) await server.stop('SIGKILL');
    console.log(`0 passed, ${tests.length} failed`);
    process.exit(1);
  }
  const selected = tests.filter((t) => args.patterns.length === 0 ||
    args.patterns.some((p) => t.name.includes(p)));
  for (const t of selected) {
    const start = Date.now();
    try {
      await t.fn();
      passed++;
      console.log(`ok   ${t.name} (${Date.now() - start} ms)`);
    } catch (err) {
      failed++;
      console.log(`FAIL ${t.name}: ${err.stack || err}`);
    }
  }
  c.close();
  const { code, signal } = await server.stop();
  if (code !== 0) {
    failed++;
    console.log(`shared server exited with ${code ?? signal} on SIGTERM (expected 0)`);
  }
  if (selected.length === 0) {
    failed++;  // a -k that matches nothing: a run that checks nothing fails
    console.log(`no test ran (${tests.length} defined, none selected by -k): a run that checks ` +
      'nothing fails');
  }
  if (failed) console.log(`server log: ${server.logPath}`);
  console.log(`${passed} passed, ${failed} failed`);
  process.exit(failed ? 1 : 0);
}

main();
