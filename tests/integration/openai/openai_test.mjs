// The official `openai` npm package, unmodified apart from its baseURL, against the real binary
// serving ../shared/models/llama-2-tiny-random.gguf: models list, chat and completions with and
// without streaming (the streamed text equals the answer's, greedy), usage in the stream,
// chat logprobs with alternatives (whole and streamed),
// several choices, a request the client aborts mid-stream, and errors as the SDK raises them.
//
//   usage: node openai_test.mjs --harrier BIN --source-dir SRC --work-dir DIR --node-modules DIR
//
// The last line is "N passed, N failed".
import { spawn } from 'node:child_process';
import fs from 'node:fs';
import { createRequire } from 'node:module';
import path from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';

const args = {};
for (let i = 2; i < process.argv.length; i++) {
  const a = process.argv[i];
  if (a.startsWith('--')) args[a.slice(2).replace(/-/g, '_')] = process.argv[++i];
}
for (const need of ['harrier', 'source_dir', 'work_dir', 'node_modules']) {
  if (!args[need]) {
    console.error(`missing --${need.replace(/_/g, '-')}`);
    process.exit(2);
  }
}
const require = createRequire(path.join(path.resolve(args.node_modules), 'noop.js'));
const OpenAI = require('openai').default ?? require('openai');

const WORK = path.resolve(args.work_dir);
const GGUF = path.join(path.resolve(args.source_dir), '..', 'shared', 'models',
  'llama-2-tiny-random.gguf');
const REPO = path.join(WORK, 'repo');

function makeRepository() {
  fs.rmSync(REPO, { recursive: true, force: true });
  fs.mkdirSync(path.join(REPO, 'tiny-llama', '1'), { recursive: true });
  fs.copyFileSync(GGUF, path.join(REPO, 'tiny-llama', '1', 'model.gguf'));
}

async function startHarrier() {
  const log = fs.createWriteStream(path.join(WORK, 'harrier.log'));
  let text = '';
  const proc = spawn(args.harrier, ['serve', '--model-repository', REPO, '--http-port', '0',
    '--grpc-port', '0', '--metrics-port', '0', '--http-threads', '2'],
  { stdio: ['ignore', 'pipe', 'pipe'] });
  for (const s of [proc.stdout, proc.stderr]) {
    s.on('data', (d) => { text += d.toString(); log.write(d); });
  }
  const exited = new Promise((resolve) => proc.on('exit', (code) => resolve(code)));
  const deadline = Date.now() + 120000;
  while (Date.now() < deadline) {
    const m = /listening on metrics \S+?:(\d+)/.exec(text);
    const http = /listening on HTTP \S+?:(\d+)/.exec(text);
    if (m && http) {
      return {
        port: Number(http[1]),
        async stop() {
          if (proc.exitCode === null) proc.kill('SIGTERM');
          const timer = setTimeout(() => proc.kill('SIGKILL'), 60000);
          const code = await exited;
          clearTimeout(timer);
          return code;
        },
        log: () => text,
      };
    }
    if (proc.exitCode !== null) break;
    await sleep(50);
  }
  proc.kill('SIGKILL');
  throw new Error(`harrier did not start:\n${text.slice(-3000)}`);
}

function assert(cond, message) {
  if (!cond) throw new Error(message);
}
function assertEqual(a, b, message) {
  if (JSON.stringify(a) !== JSON.stringify(b))
    throw new Error(`${message}: ${JSON.stringify(a)} != ${JSON.stringify(b)}`);
}

const tests = {
  async modelsList(client) {
    const models = [];
    for await (const m of client.models.list()) models.push(m.id);
    assertEqual(models, ['tiny-llama'], 'models');
    const one = await client.models.retrieve('tiny-llama');
    assertEqual(one.id, 'tiny-llama', 'retrieve');
  },

  async chatWithAndWithoutStreaming(client) {
    const request = { model: 'tiny-llama', messages: [{ role: 'system', content: 'Be brief.' },
      { role: 'user', content: 'Say hello' }], max_tokens: 12, temperature: 0 };
    const answer = await client.chat.completions.create(request);
    assertEqual(answer.object, 'chat.completion', 'object');
    assertEqual(answer.choices[0].message.role, 'assistant', 'role');
    assertEqual(answer.choices[0].finish_reason, 'length', 'finish_reason');
    assertEqual(answer.usage.completion_tokens, 12, 'completion_tokens');
    const stream = await client.chat.completions.create({ ...request, stream: true,
      stream_options: { include_usage: true } });
    let text = '';
    let usage = null;
    let finish = null;
    for await (const chunk of stream) {
      if (chunk.usage) usage = chunk.usage;
      for (const c of chunk.choices) {
        text += c.delta?.content ?? '';
        if (c.finish_reason) finish = c.finish_reason;
      }
    }
    assertEqual(text, answer.choices[0].message.content, 'streamed text');
    assertEqual(finish, 'length', 'streamed finish_reason');
    assertEqual(usage?.completion_tokens, 12, 'streamed usage');
  },

  async chatLogprobs(client) {
    const request = { model: 'tiny-llama', messages: [{ role: 'user', content: 'Count to five' }],
      max_tokens: 8, temperature: 0, logprobs: true, top_logprobs: 2 };
    const answer = await client.chat.completions.create(request);
    const choice = answer.choices[0];
    assertEqual(choice.finish_reason, 'length', 'finish_reason');
    const content = choice.logprobs?.content;
    assert(Array.isArray(content), `no logprobs.content: ${JSON.stringify(choice.logprobs)}`);
    assertEqual(content.length, 8, 'one entry per token');
    const bytes = [];
    for (const t of content) {
      assert(typeof t.token === 'string' && Array.isArray(t.bytes), `entry ${JSON.stringify(t)}`);
      assert(t.logprob <= 0, `logprob ${t.logprob}`);
      assertEqual(t.top_logprobs.length, 2, 'alternatives');
      assert(t.top_logprobs[0].logprob >= t.top_logprobs[1].logprob, 'likeliest first');
      // Greedy: the chosen token is the likeliest.
      assertEqual(t.top_logprobs[0].token, t.token, 'greedy token first');
      assertEqual(t.top_logprobs[0].logprob, t.logprob, 'its logprob');
      bytes.push(...t.bytes);
    }
    assertEqual(Buffer.from(bytes).toString('utf8'), choice.message.content, 'bytes are the text');

    const stream = await client.chat.completions.create({ ...request, stream: true });
    const streamed = [];
    for await (const chunk of stream) {
      for (const c of chunk.choices) streamed.push(...(c.logprobs?.content ?? []));
    }
    assertEqual(streamed, content, 'streamed logprobs');

    const plain = await client.chat.completions.create({ ...request, logprobs: undefined,
      top_logprobs: undefined });
    assertEqual(plain.choices[0].logprobs, null, 'logprobs not asked');
  },

  async completionsAndChoices(client) {
    const answer = await client.completions.create({ model: 'tiny-llama', prompt: 'Once upon',
      max_tokens: 6, temperature: 0, n: 2 });
    assertEqual(answer.choices.length, 2, 'choices');
    assertEqual(answer.choices[0].text, answer.choices[1].text, 'greedy choices agree');
    const stream = await client.completions.create({ model: 'tiny-llama', prompt: 'Once upon',
      max_tokens: 6, temperature: 0, stream: true });
    let text = '';
    for await (const chunk of stream) text += chunk.choices[0]?.text ?? '';
    assertEqual(text, answer.choices[0].text, 'streamed completion');
  },

  async abortMidStream(client) {
    const controller = new AbortController();
    const stream = await client.completions.create({ model: 'tiny-llama', prompt: 'Go on',
      max_tokens: 2000, stream: true }, { signal: controller.signal });
    let chunks = 0;
    try {
      for await (const chunk of stream) {
        if (chunk && ++chunks === 3) {
          controller.abort();
          break;
        }
      }
    } catch (e) {
      assert(e.name === 'AbortError' || /abort/i.test(String(e)), `unexpected ${e}`);
    }
    assertEqual(chunks, 3, 'chunks before the abort');
    // The server goes on answering.
    const after = await client.completions.create({ model: 'tiny-llama', prompt: 'x',
      max_tokens: 1 });
    assertEqual(after.choices.length, 1, 'after the abort');
  },

  async errorsAsTheSdkRaisesThem(client) {
    try {
      await client.chat.completions.create({ model: 'nope', messages: [{ role: 'user',
        content: 'x' }] });
      throw new Error('no error for an unknown model');
    } catch (e) {
      assertEqual(e.status, 404, 'status');
      assertEqual(e.code, 'model_not_found', 'code');
    }
    try {
      await client.completions.create({ model: 'tiny-llama', prompt: 'x', max_tokens: -1 });
      throw new Error('no error for max_tokens -1');
    } catch (e) {
      assertEqual(e.status, 400, 'status');
      assertEqual(e.param, 'max_tokens', 'param');
    }
  },
};

async function main() {
  fs.mkdirSync(WORK, { recursive: true });
  if (!fs.existsSync(GGUF)) {
    console.log(`setup failed: no ${GGUF}`);
    console.log('0 passed, 1 failed');
    return 1;
  }
  makeRepository();
  const server = await startHarrier();
  const client = new OpenAI({ baseURL: `http://127.0.0.1:${server.port}/v1`, apiKey: 'unused',
    maxRetries: 0 });
  let passed = 0;
  let failed = 0;
  for (const [name, fn] of Object.entries(tests)) {
    try {
      await fn(client);
      passed++;
      console.log(`ok ${name}`);
    } catch (e) {
      failed++;
      console.log(`FAIL ${name}: ${e.stack ?? e}`);
    }
  }
  const rc = await server.stop();
  if (rc !== 0) {
    failed++;
    console.log(`harrier exited with ${rc} on SIGTERM (expected 0)`);
  }
  if (failed) console.log(`server log: ${path.join(WORK, 'harrier.log')}`);
  console.log(`${passed} passed, ${failed} failed`);
  return failed ? 1 : 0;
}

process.exit(await main());
