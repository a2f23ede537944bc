// test_openai_client.mjs: hearth's OpenAI generation API driven by the
// official `openai` npm client, as users will: chat and text completions,
// streamed and not, usage and include_usage, stop sequences, and errors
// surfaced as the client's own error classes.
//
// Needs the client installed: `npm ci --prefix tests/api` (package-lock.json
// pins it). Prints one "ok - name" / "not ok - name" line per test, which
// tests/run.sh counts. References: stories260K's GOLDEN.txt (greedy text
// from BOS, made by a pure-Python port of llama2.c) and the requests' own
// inputs.
import { spawn, spawnSync } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const HERE = path.dirname(fileURLToPath(import.meta.url));
const ROOT = path.join(HERE, '..', '..');
const BIN = process.env.HEARTH_BIN || path.join(ROOT, 'build', 'hearth');
const BUILD = process.env.HEARTH_BUILD || path.join(ROOT, 'build');
const SHARED = process.env.HEARTH_SHARED || path.join(ROOT, '..', 'shared');
const STORIES_DIR = path.join(SHARED, 'models', 'stories260K');
const STORIES = path.join(STORIES_DIR, 'stories260K.gguf');

let OpenAI;
try {
  const require = createRequire(path.join(HERE, 'package.json'));
  ({ default: OpenAI } = await import(require.resolve('openai')));
} catch (e) {
  console.log('not ok - setup: the openai npm package is not installed in tests/api/node_modules: ' +
              'run `npm ci --prefix tests/api` (' + e.message.split('\n')[0] + ')');
  process.exit(1);
}

function assert(cond, msg) {
  if (!cond) throw new Error('assertion failed: ' + (typeof msg === 'string' ? msg : JSON.stringify(msg)));
}

function golden() {
  const lines = readFileSync(path.join(STORIES_DIR, 'GOLDEN.txt'), 'utf8').split('\n');
  return lines[lines.indexOf('decoded text:') + 1];
}

function freePort() {
  return new Promise((resolve, reject) => {
    const s = net.createServer();
    s.listen(0, '127.0.0.1', () => {
      const { port } = s.address();
      s.close(() => resolve(port));
    });
    s.on('error', reject);
  });
}

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

async function startServer(args) {
  const port = await freePort();
  const proc = spawn(BIN, ['serve', '--port', String(port), '--log-level', 'warn', ...args],
                     { stdio: ['ignore', 'pipe', 'pipe'], env: { ...process.env, HEARTH_DEMO: '0' } });
  const log = [];
  proc.stdout.on('data', (d) => log.push(d.toString()));
  proc.stderr.on('data', (d) => log.push(d.toString()));
  const exited = new Promise((resolve) => proc.on('exit', (code, sig) => resolve(code ?? sig)));
  const deadline = Date.now() + 120000;
  for (;;) {
    try {
      const r = await fetch(`http://127.0.0.1:${port}/health`);
      if (r.status === 200) break;
    } catch { /* not listening yet */ }
    if (proc.exitCode !== null || Date.now() > deadline)
      throw new Error('the server did not become healthy; log:\n' + log.join(''));
    await sleep(50);
  }
  return {
    port,
    log,
    async stop() {
      proc.kill('SIGTERM');
      const code = await Promise.race([exited, sleep(30000).then(() => 'timeout')]);
      if (code !== 0) throw new Error(`the server exited with ${code}; log tail:\n` + log.join('').slice(-4000));
    },
  };
}

async function collect(stream) {
  const chunks = [];
  for await (const c of stream) chunks.push(c);
  return chunks;
}

// ---- tests ----

const MSGS = [{ role: 'system', content: 'You tell short stories.' }, { role: 'user', content: 'Once upon a time' }];

async function testChatWhole(client) {
  const r = await client.chat.completions.create({ model: 'stories', messages: MSGS, max_tokens: 12, temperature: 0 });
  assert(/^chatcmpl-[0-9a-f]+$/.test(r.id) && r.object === 'chat.completion', r);
  assert(r.model === 'stories' && Number.isInteger(r.created), r);
  const c = r.choices[0];
  assert(c.index === 0 && c.message.role === 'assistant' && typeof c.message.content === 'string', c);
  assert(['stop', 'length'].includes(c.finish_reason), c);
  const u = r.usage;
  assert(u.prompt_tokens > 0 && u.completion_tokens > 0 && u.completion_tokens <= 12, u);
  assert(u.total_tokens === u.prompt_tokens + u.completion_tokens, u);
  return r;
}

async function testChatStream(client) {
  const whole = await testChatWhole(client);
  const stream = await client.chat.completions.create({
    model: 'stories', messages: MSGS, max_tokens: 12, temperature: 0, stream: true,
    stream_options: { include_usage: true },
  });
  const chunks = await collect(stream);
  assert(chunks[0].choices[0].delta.role === 'assistant', chunks[0]);
  const usage = chunks[chunks.length - 1];
  assert(usage.choices.length === 0 && usage.usage.completion_tokens === whole.usage.completion_tokens, usage);
  const fin = chunks[chunks.length - 2].choices[0];
  assert(fin.finish_reason === whole.choices[0].finish_reason, fin);
  const text = chunks.map((c) => c.choices[0]?.delta?.content ?? '').join('');
  assert(text === whole.choices[0].message.content, { text, whole: whole.choices[0].message.content });
  assert(chunks.every((c) => c.object === 'chat.completion.chunk'), 'chunk objects');
  assert(new Set(chunks.map((c) => c.id)).size === 1, 'one id per stream');
  // without include_usage there is no usage chunk
  const plain = await collect(await client.chat.completions.create({
    model: 'stories', messages: MSGS, max_tokens: 3, temperature: 0, stream: true }));
  assert(plain.every((c) => c.choices.length === 1 && !c.usage), plain);
}

async function testCompletionsGolden(client) {
  const text = golden();
  // an empty prompt is BOS alone, where the golden run starts
  const r = await client.completions.create({ model: 'stories', prompt: '', max_tokens: 60, temperature: 0 });
  assert(r.object === 'text_completion' && r.id.startsWith('cmpl-'), r);
  assert(r.choices[0].text.trimStart() === text, { got: r.choices[0].text, want: text });
  assert(r.choices[0].finish_reason === 'length' && r.usage.completion_tokens === 60 && r.usage.prompt_tokens === 1, r);
  const chunks = await collect(await client.completions.create({
    model: 'stories', prompt: '', max_tokens: 60, temperature: 0, stream: true, stream_options: { include_usage: true } }));
  const streamed = chunks.filter((c) => c.choices.length).map((c) => c.choices[0].text).join('');
  assert(streamed === r.choices[0].text, { streamed, whole: r.choices[0].text });
  assert(chunks[chunks.length - 1].usage.total_tokens === 61, chunks[chunks.length - 1]);
}

async function testStopSequences(client) {
  const text = golden();
  const want = text.slice(0, text.indexOf('girl'));
  const r = await client.completions.create({ model: 'stories', prompt: '', max_tokens: 60, temperature: 0, stop: 'girl' });
  assert(r.choices[0].text.trimStart() === want && r.choices[0].finish_reason === 'stop', r.choices[0]);
  const chunks = await collect(await client.completions.create({
    model: 'stories', prompt: '', max_tokens: 60, temperature: 0, stop: ['zebra', 'girl'], stream: true }));
  const streamed = chunks.map((c) => c.choices[0].text).join('');
  assert(streamed.trimStart() === want, { streamed, want });
  assert(chunks[chunks.length - 1].choices[0].finish_reason === 'stop', chunks[chunks.length - 1]);
  // chat: the stop string never shows, even split over tokens
  const c = await client.chat.completions.create({ model: 'stories', messages: MSGS, max_tokens: 40, temperature: 0 });
  const content = c.choices[0].message.content;
  if (content.length > 6) {
    const cut = content.slice(3, 6);
    const s = await client.chat.completions.create({ model: 'stories', messages: MSGS, max_tokens: 40, temperature: 0,
                                                     stop: [cut] });
    assert(s.choices[0].message.content === content.slice(0, content.indexOf(cut)), { s: s.choices[0], cut, content });
    assert(s.choices[0].finish_reason === 'stop', s.choices[0]);
  }
}

async function testDefaultAndOtherModel(client) {
  // no model: the first generation model; the random-weight one by name
  const r = await client.completions.create({ prompt: 'Once', max_tokens: 4, temperature: 0 });
  assert(r.model === 'stories', r);
  const q = await client.chat.completions.create({ model: 'rand', messages: MSGS, max_tokens: 5, seed: 7 });
  assert(q.model === 'rand' && q.usage.completion_tokens <= 5, q);
  const list = await client.models.list();
  const ids = [];
  for await (const m of list) ids.push(m.id);
  assert(ids.includes('stories') && ids.includes('rand'), ids);
}

async function expectError(promise, cls, status, needle) {
  try {
    await promise;
  } catch (e) {
    assert(e instanceof cls, `expected ${cls.name}, got ${e.constructor.name}: ${e.message}`);
    assert(e.status === status, e);
    assert(e.message.includes(needle), `'${needle}' not in '${e.message}'`);
    return;
  }
  throw new Error(`expected ${cls.name}, the request succeeded`);
}

async function testErrors(client) {
  await expectError(client.chat.completions.create({ model: 'nope', messages: MSGS }), OpenAI.NotFoundError, 404, 'nope');
  await expectError(client.completions.create({ model: 'gpt-x', prompt: 'a' }), OpenAI.NotFoundError, 404, 'gpt-x');
  await expectError(client.chat.completions.create({ model: 'stories', messages: MSGS, n: 2 }), OpenAI.BadRequestError, 400, 'n');
  await expectError(client.chat.completions.create({ model: 'stories', messages: MSGS, logprobs: true }),
                    OpenAI.BadRequestError, 400, 'logprobs');
  await expectError(client.chat.completions.create({ model: 'stories', messages: MSGS, temperature: -1 }),
                    OpenAI.BadRequestError, 400, 'temperature');
  await expectError(client.chat.completions.create({ model: 'stories', messages: [{ role: 'user', content: [{ type: 'image_url', image_url: { url: 'x' } }] }] }),
                    OpenAI.BadRequestError, 400, 'text');
  await expectError(client.completions.create({ model: 'stories', prompt: 'x'.repeat(5000) }),
                    OpenAI.BadRequestError, 400, 'context');
  // a stream that cannot start is an error before any chunk, not a broken stream
  await expectError(client.chat.completions.create({ model: 'nope', messages: MSGS, stream: true }),
                    OpenAI.NotFoundError, 404, 'nope');
}

async function testNoTemplate() {
  const srv = await startServer(['--model', STORIES]);
  try {
    const client = new OpenAI({ baseURL: `http://127.0.0.1:${srv.port}/v1`, apiKey: 'none', maxRetries: 0 });
    await expectError(client.chat.completions.create({ messages: MSGS }), OpenAI.BadRequestError, 400, '--chat-template');
  } finally {
    await srv.stop();
  }
}

// ---- main ----

let failed = 0;
async function runTest(name, fn) {
  const t0 = Date.now();
  try {
    await fn();
    console.log(`ok - ${name} (${((Date.now() - t0) / 1000).toFixed(1)}s)`);
  } catch (e) {
    console.log(`not ok - ${name}`);
    console.log(String(e.stack || e).split('\n').map((l) => '    ' + l).join('\n'));
    failed++;
  }
}

if (!existsSync(BIN)) {
  console.log(`not ok - setup: ${BIN} is not built`);
  process.exit(1);
}
const tmp = mkdtempSync(path.join(os.tmpdir(), 'hearth-oai-'));
const rand = path.join(tmp, 'rand.gguf');
const w = spawnSync(path.join(BUILD, 'tests', 'models', 'test_llama_demo_tool'), ['write', rand, 'llama', 'f32', STORIES]);
if (w.status !== 0) {
  console.log('not ok - setup: cannot write the random-weight model: ' + String(w.stderr));
  process.exit(1);
}
const srv = await startServer(['--model', `stories=${STORIES}`, '--model', `rand=${rand}`, '--parallel', '4',
                               '--chat-template', 'chatml']);
const client = new OpenAI({ baseURL: `http://127.0.0.1:${srv.port}/v1`, apiKey: 'none', maxRetries: 0, timeout: 120000 });
await runTest('chat_whole', () => testChatWhole(client));
await runTest('chat_stream_include_usage', () => testChatStream(client));
await runTest('completions_golden_whole_and_streamed', () => testCompletionsGolden(client));
await runTest('stop_sequences', () => testStopSequences(client));
await runTest('default_and_other_model', () => testDefaultAndOtherModel(client));
await runTest('errors_are_client_error_classes', () => testErrors(client));
await runTest('server_exits_cleanly', () => srv.stop());
await runTest('chat_without_template', testNoTemplate);
process.exit(failed ? 1 : 0);
