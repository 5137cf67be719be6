// Unit tests of the web client's pure modules in Node, without a server or a browser:
// steno-client.js against a scripted WebSocket, and transcript.js.
//   node --test Tests/browser/unit_test.mjs
import { test } from 'node:test';
import assert from 'node:assert/strict';
import * as client from '../../web-client/steno-client.js';
import * as transcript from '../../web-client/transcript.js';
import { defaultStreamUrl, reconnectedMessage } from '../../web-client/page.js';
const { StenoClient, StenoError } = client;

/** A WebSocket whose server side the test plays. */
class ScriptedSocket {
  static instances = [];
  constructor(url) {
    this.url = url;
    this.sent = [];
    this.bufferedAmount = 0;
    this.closedWith = null;
    ScriptedSocket.instances.push(this);
  }
  open() { this.onopen?.(); }
  send(data) { this.sent.push(typeof data === 'string' ? JSON.parse(data) : new Uint8Array(data)); }
  close(code = 1000, reason = '') {
    this.closedWith = code;
    setTimeout(() => this.onclose?.({ code, reason, wasClean: true }), 0);
  }
  emit(message) { this.onmessage?.({ data: JSON.stringify(message) }); }
  drop(code, wasClean = false) { this.onclose?.({ code, reason: '', wasClean }); }
  fail() { this.onerror?.({ type: 'error' }); } // an error and no close (Node 20's refused handshake)
  get texts() { return this.sent.filter((m) => !(m instanceof Uint8Array)); }
  get frames() { return this.sent.filter((m) => m instanceof Uint8Array); }
}

function make(options = {}) {
  const c = new StenoClient('http://example.test:8080', { WebSocket: ScriptedSocket, token: 't k', ...options });
  const ready = c.start();
  const socket = ScriptedSocket.instances.at(-1);
  return { c, ready, socket };
}

const tick = () => new Promise((resolve) => setTimeout(resolve, 0));

test('URL, start message, and audio queued until ready', async () => {
  const { c, ready, socket } = make({ language: 'en-US', channel: 'studio-a' });
  assert.equal(socket.url, 'ws://example.test:8080/v1/stream?token=t+k');
  c.sendAudio(new Uint8Array([1, 2, 3, 4]));
  c.finalize();
  assert.equal(socket.sent.length, 0, 'nothing before the socket opens');
  socket.open();
  assert.deepEqual(socket.texts[0], {
    type: 'start', audio: { encoding: 'pcm_s16le', sampleRate: 16000, channels: 1 },
    volatile: true, words: true, language: 'en-US', channel: 'studio-a',
  });
  assert.equal(socket.sent.length, 1, 'audio waits for ready');
  assert.equal(c.bufferedAmount, 4);
  socket.emit({ type: 'ready', seq: 1, session: 'abc' });
  assert.deepEqual(await ready, { type: 'ready', seq: 1, session: 'abc' });
  assert.equal(c.session, 'abc');
  assert.equal(c.state, 'ready');
  assert.deepEqual(socket.sent.slice(1).map((m) => (m instanceof Uint8Array ? [...m] : m.type)), [[1, 2, 3, 4], 'finalize']);
});

test('phrases go into start, and parsePhrases reads them one per line within the bounds', async () => {
  const { socket } = make({ phrases: ['John Dashwood', 'Kubernetes'] });
  socket.open();
  assert.deepEqual(socket.texts[0].phrases, ['John Dashwood', 'Kubernetes']);
  const none = make({ phrases: [] });
  none.socket.open();
  assert.equal('phrases' in none.socket.texts[0], false, 'no empty list is sent');
  assert.deepEqual(client.parsePhrases(' John Dashwood \r\n\n# a comment\nKubernetes\n'),
    { phrases: ['John Dashwood', 'Kubernetes'], problem: null });
  assert.deepEqual(client.parsePhrases(''), { phrases: [], problem: null });
  const many = Array.from({ length: client.MAX_PHRASES + 1 }, (_, i) => `w${i}`).join('\n');
  assert.equal(client.parsePhrases(many).problem, '1001 phrases; at most 1000 are allowed');
  assert.match(client.parsePhrases('one two three four five six seven eight nine ten eleven').problem, /more than 10 words/);
});

for (const [option, one, other] of [['profanity', 'keep', 'remove'], ['model', 'en-us', 'whisper-base']]) {
  test(`${option} goes into start when given, and a publisher opens every session with it`, async () => {
    const { socket } = make({ [option]: one });
    socket.open();
    assert.equal(socket.texts[0][option], one);
    const none = make();
    none.socket.open();
    assert.equal(option in none.socket.texts[0], false, "the server's default when not given");
    const { p, nextSocket, admit } = makePublisher({ [option]: other });
    p.start();
    const a = await nextSocket(0);
    admit(a, 'one'); // a server without resume: the next connection starts a new session
    assert.equal(a.texts[0][option], other);
    a.drop(1006);
    const b = await nextSocket(1);
    admit(b, 'two');
    assert.equal(b.texts[0].type, 'start');
    assert.equal(b.texts[0][option], other);
    const ended = p.end();
    b.emit({ type: 'ended', seq: 2, duration: 0 });
    b.drop(1000, true);
    await ended;
  });
}

test('a refused handshake reported by an error alone still closes the client and the viewer', async () => {
  const { c, ready, socket } = make();
  socket.fail();
  await assert.rejects(ready, (e) => e.code === 'connection_failed' && e.closeCode === 1006);
  const closed = await c.closed;
  assert.equal(closed.code, 1006);
  // A browser's close after its error changes nothing.
  socket.drop(1006);
  assert.equal(c.state, 'closed');
  const viewer = new client.StenoViewer('ws://h.test', 'studio-a', { WebSocket: ScriptedSocket, reconnect: false });
  viewer.start();
  ScriptedSocket.instances.at(-1).fail();
  const result = await viewer.closed;
  assert.equal(result.code, 1006);
  assert.equal(result.error.code, 'connection_failed');
});


test("the server's models: their address, the default first, none when they cannot be had", async () => {
  assert.equal(client.modelsUrl('wss://host.test/steno/v1/stream', { token: 't' }), 'https://host.test/steno/v1/models?token=t');
  assert.equal(client.modelsUrl('http://host.test:8080'), 'http://host.test:8080/v1/models');
  const asked = [];
  const answer = (status, body) => async (url) => {
    asked.push(url);
    return { ok: status === 200, status, json: async () => body };
  };
  const listed = { models: [{ name: 'en-us', engine: 'pocketsphinx', default: false },
    { name: 'whisper-tiny.en', engine: 'whisper', default: true }, { engine: 'nameless' }] };
  const models = await client.fetchModels('ws://h.test/v1/stream', { fetch: answer(200, listed) });
  assert.deepEqual(models.map((m) => m.name), ['whisper-tiny.en', 'en-us']);
  assert.equal(asked[0], 'http://h.test/v1/models');
  assert.deepEqual(await client.fetchModels('ws://h.test', { fetch: answer(401, {}) }), []);
  assert.deepEqual(await client.fetchModels('ws://h.test', { fetch: answer(200, 'not models') }), []);
  assert.deepEqual(await client.fetchModels('ws://h.test', { fetch: async () => { throw new TypeError('down'); } }), []);
  assert.deepEqual(await client.fetchModels('ws://h.test', { fetch: null }), []);
});

test('PCM is re-cut into whole samples and frames of at most maxFrameBytes', async () => {
  const { c, socket } = make({ maxFrameBytes: 1000 });
  socket.open();
  socket.emit({ type: 'ready', seq: 1 });
  c.sendAudio(new Uint8Array([1, 2, 3]));
  c.sendAudio(new Uint8Array([4, 5, 6]).buffer);
  assert.deepEqual(socket.frames.map((f) => [...f]), [[1, 2], [3, 4, 5, 6]]);
  c.sendAudio(new Int16Array(1500)); // 3000 bytes
  assert.deepEqual(socket.frames.slice(2).map((f) => f.length), [1000, 1000, 1000]);
  assert.equal(c.sentSeconds, (3 + 1500) / 16000);
  c.sendAudio(new Float32Array([1, -1, 0.5, 0]));
  const last = socket.frames.at(-1);
  assert.deepEqual([...new Int16Array(last.buffer.slice(0))], [32767, -32768, 16384, 0]);
});

test('pcm_f32le takes Float32Array samples as they are; stereo frames stay whole', async () => {
  const { c, socket } = make({ audio: { encoding: 'pcm_f32le', sampleRate: 48000, channels: 2 } });
  socket.open();
  socket.emit({ type: 'ready', seq: 1 });
  c.sendAudio(new Float32Array([0.25, -0.25, 0.5]));
  assert.deepEqual([...new Float32Array(socket.frames[0].buffer.slice(0))], [0.25, -0.25]);
  c.sendAudio(new Float32Array([-0.5]));
  assert.deepEqual([...new Float32Array(socket.frames[1].buffer.slice(0))], [0.5, -0.5]);
  assert.equal(c.sentSeconds, 2 / 48000);
});

test('Opus packets are sent whole and their duration counted from the TOC byte', async () => {
  const { c, socket } = make({ audio: { encoding: 'opus', sampleRate: 48000, channels: 1 } });
  socket.open();
  socket.emit({ type: 'ready', seq: 1 });
  const packet = new Uint8Array(70001 % 300).fill(7);
  packet[0] = 0x78; // hybrid fullband, 20 ms, one frame
  c.sendAudio(packet);
  assert.deepEqual([...socket.frames[0]], [...packet]);
  assert.equal(c.sentSeconds, 0.02);
  assert.throws(() => c.sendAudio(new Float32Array(10)), TypeError);
});

test('opusPacketSamples reads RFC 6716 TOC bytes', () => {
  const n = client.opusPacketSamples;
  assert.equal(n(new Uint8Array([0x48])), 960); // SILK wideband 20 ms
  assert.equal(n(new Uint8Array([0x00])), 480); // SILK narrowband 10 ms
  assert.equal(n(new Uint8Array([0x18])), 2880); // SILK narrowband 60 ms
  assert.equal(n(new Uint8Array([0x78])), 960); // hybrid fullband 20 ms
  assert.equal(n(new Uint8Array([0x70])), 480); // hybrid fullband 10 ms
  assert.equal(n(new Uint8Array([0xb8])), 960); // CELT wideband 20 ms
  assert.equal(n(new Uint8Array([0x80])), 120); // CELT narrowband 2.5 ms
  assert.equal(n(new Uint8Array([0x79, 0])), 1920); // code 1: two frames
  assert.equal(n(new Uint8Array([0x7b, 0x03])), 2880); // code 3: three frames
  assert.equal(n(new Uint8Array([])), 0);
  assert.equal(n(new Uint8Array([0x7b])), 0, 'code 3 without its frame-count byte');
  assert.equal(n(new Uint8Array([0x7b, 0x00])), 0, 'code 3 with no frames');
  // At most 120 ms (5760 samples) per packet, as RFC 6716 and the server (OpusPacket.swift) say.
  assert.equal(client.OPUS_MAX_PACKET_SAMPLES, 5760);
  assert.equal(n(new Uint8Array([0x7b, 0x06])), 5760, 'six 20 ms frames: 120 ms, the most allowed');
  assert.equal(n(new Uint8Array([0x7b, 0x07])), 0, 'seven 20 ms frames: 140 ms');
  assert.equal(n(new Uint8Array([0x1b, 0x02])), 5760, 'two 60 ms SILK frames');
  assert.equal(n(new Uint8Array([0x1b, 0x03])), 0, 'three 60 ms SILK frames: 180 ms');
  assert.equal(n(new Uint8Array([0x19, 0])), 5760, 'code 1: two 60 ms frames');
  assert.equal(n(new Uint8Array([0x83, 0x30])), 5760, '48 CELT frames of 2.5 ms');
  assert.equal(n(new Uint8Array([0x83, 0x31])), 0, '49 CELT frames of 2.5 ms');
  assert.equal(n(new Uint8Array([0x83, 0x3f])), 0, 'the largest frame count, 63');
});

test('sentSeconds counts a malformed Opus packet as long as the last good one, as the server does', async () => {
  const { c, socket } = make({ audio: { encoding: 'opus', sampleRate: 48000, channels: 1 } });
  socket.open();
  socket.emit({ type: 'ready', seq: 1 });
  c.sendAudio(new Uint8Array([0x7b])); // malformed before any good packet: 20 ms
  assert.equal(c.sentSeconds, 0.02);
  c.sendAudio(new Uint8Array([0x1b, 0x02])); // 120 ms
  c.sendAudio(new Uint8Array([0x7b, 0x07])); // too long: counted as the last good one
  assert.equal(Math.round(c.sentSeconds * 1000), 260);
  assert.equal(socket.frames.length, 3, 'every packet is sent; the server conceals what it cannot decode');
});

test('finalize, end: promises in order, events as callbacks and as an async iterator', async () => {
  const { c, socket } = make();
  const seen = [];
  c.on('event', (e) => seen.push(e.type));
  const finals = [];
  const off = c.on('final', (e) => finals.push(e.text));
  const iterated = [];
  const iterating = (async () => { for await (const e of c) iterated.push(e.seq); })();
  socket.open();
  socket.emit({ type: 'ready', seq: 1 });
  const first = c.finalize();
  const second = c.finalize(1.5);
  assert.deepEqual(socket.texts.slice(1), [{ type: 'finalize' }, { type: 'finalize', through: 1.5 }]);
  socket.emit({ type: 'volatile', seq: 2, start: 0, end: 1, text: 'hel' });
  socket.emit({ type: 'final', seq: 3, start: 0, end: 1, text: 'hello' });
  socket.emit({ type: 'finalized', seq: 4, through: 2 });
  socket.emit({ type: 'finalized', seq: 5, through: 1.5 });
  assert.equal((await first).through, 2);
  assert.equal((await second).through, 1.5);
  socket.emit({ type: 'progress', seq: 6, received: 3, analyzed: 2.25 });
  assert.equal(c.lag, 0.75);
  off();
  const ended = c.end();
  assert.equal(c.state, 'ending');
  assert.throws(() => c.sendAudio(new Uint8Array(2)), StenoError);
  await assert.rejects(c.finalize(), (e) => e.code === 'closed');
  socket.emit({ type: 'final', seq: 7, start: 1, end: 2, text: 'world' });
  socket.emit({ type: 'ended', seq: 8, duration: 3 });
  socket.drop(1000, true);
  assert.equal((await ended).duration, 3);
  const closed = await c.closed;
  assert.equal(closed.code, 1000);
  assert.equal(closed.error, null);
  await iterating;
  assert.deepEqual(iterated, [1, 2, 3, 4, 5, 6, 7, 8]);
  assert.deepEqual(seen, ['ready', 'volatile', 'final', 'finalized', 'finalized', 'progress', 'final', 'ended']);
  assert.deepEqual(finals, ['hello'], 'off() removes the callback');
  assert.equal(c.lastSeq, 8);
  assert.equal(c.state, 'closed');
});

test('a fatal error rejects start(), pending calls and the iterator with its code', async () => {
  const { c, ready, socket } = make({ audio: { encoding: 'opus', sampleRate: 44100, channels: 1 } });
  const iterating = (async () => { for await (const e of c.events()) void e; })();
  const pending = c.finalize();
  socket.open();
  const errors = [];
  c.on('error', (e) => errors.push(e.code));
  socket.emit({ type: 'error', seq: 1, code: 'unsupported_audio', message: 'opus at 44100 Hz', fatal: true });
  socket.drop(1003, true);
  await assert.rejects(ready, (e) => e instanceof StenoError && e.code === 'unsupported_audio' &&
    e.closeCode === 1003 && e.message === 'opus at 44100 Hz');
  await assert.rejects(pending, (e) => e.code === 'unsupported_audio');
  await assert.rejects(iterating, (e) => e.code === 'unsupported_audio');
  assert.deepEqual(errors, ['unsupported_audio']);
  assert.equal((await c.closed).error.code, 'unsupported_audio');
  await assert.rejects(c.end(), (e) => e.code === 'unsupported_audio');
});

test('transport failures: never opened, and lost after ready', async () => {
  const first = make();
  first.socket.drop(1006);
  await assert.rejects(first.ready, (e) => e.code === 'connection_failed' && e.closeCode === 1006);

  const second = make();
  second.socket.open();
  second.socket.emit({ type: 'ready', seq: 1 });
  await second.ready;
  const ended = second.c.end();
  second.socket.drop(1006);
  await assert.rejects(ended, (e) => e.code === 'connection_lost');
  assert.equal(client.shouldReconnect((await second.c.closed).code), true);
});

test('non-fatal errors are events only; a server close after a fatal error keeps its code', async () => {
  const { c, socket } = make();
  socket.open();
  socket.emit({ type: 'ready', seq: 1 });
  const events = [];
  c.on('error', (e) => events.push([e.code, e.fatal]));
  socket.emit({ type: 'error', seq: 2, code: 'bad_audio', message: 'x', fatal: false });
  assert.equal(c.state, 'ready');
  assert.equal(c.error, null);
  socket.emit({ type: 'error', seq: 3, code: 'session_limit', message: 'y', fatal: true });
  socket.drop(4009, true);
  const closed = await c.closed;
  assert.deepEqual(events, [['bad_audio', false], ['session_limit', true]]);
  assert.equal(closed.error.code, 'session_limit');
  assert.equal(closed.error.closeCode, 4009);
});

test('cancel resolves on cancelled; close() ends a session without end', async () => {
  const a = make();
  a.socket.open();
  a.socket.emit({ type: 'ready', seq: 1 });
  const cancelled = a.c.cancel();
  assert.deepEqual(a.socket.texts.at(-1), { type: 'cancel' });
  a.socket.emit({ type: 'cancelled', seq: 2, through: 0 });
  a.socket.drop(1000, true);
  assert.equal((await cancelled).through, 0);
  assert.equal((await a.c.closed).error, null);

  const b = make();
  b.socket.open();
  b.socket.emit({ type: 'ready', seq: 1 });
  const ending = b.c.finalize();
  await b.c.close();
  assert.equal(b.socket.closedWith, 1000);
  await assert.rejects(ending, (e) => e.code === 'closed');
  await tick();
});

test('helpers: shouldReconnect, describeError, streamUrl', () => {
  for (const code of [1001, 1006, 1011, 4008, 4009]) assert.equal(client.shouldReconnect(code), true, code);
  for (const code of [1000, 1003, 1009, 4010, 4400]) assert.equal(client.shouldReconnect(code), false, code);
  assert.match(client.describeError('idle'), /no audio/);
  assert.equal(client.describeError(4010), client.describeError('idle'));
  assert.match(client.describeError('something_new'), /something_new/);
  assert.equal(client.streamUrl('https://h.example/'), 'wss://h.example/v1/stream');
  assert.equal(client.streamUrl('ws://h:1/custom?x=1', { token: 'a' }), 'ws://h:1/custom?x=1&token=a');
  assert.throws(() => client.streamUrl('ftp://h/'), TypeError);
});

// ---- StenoViewer ---------------------------------------------------------------------------

const { StenoViewer } = client;
const wait = (ms) => new Promise((resolve) => setTimeout(resolve, ms));

/** A viewer on a scripted socket with a fast backoff (1–8 ms), and everything it delivered. */
function makeViewer(options = {}) {
  const before = ScriptedSocket.instances.length;
  const v = StenoClient.listen('https://example.test/v1/stream', 'studio-a', {
    WebSocket: ScriptedSocket, token: 'tok', minDelay: 0.001, maxDelay: 0.008, jitter: 0,
    fetch: async () => { throw new TypeError('no server here'); }, ...options,
  });
  const seen = [];
  const states = [];
  v.on('event', (e) => seen.push(e.type === 'final' ? `final ${e.text}` : e.type === 'joined' ? `joined ${e.resumed}` : e.type));
  v.on('state', (s) => states.push(s.state));
  const socketAt = (i) => ScriptedSocket.instances[before + i];
  const nextSocket = async (i) => {
    for (let n = 0; n < 200 && !socketAt(i); n++) await wait(2);
    assert.ok(socketAt(i), `no connection attempt ${i + 1}`);
    return socketAt(i);
  };
  return { v, seen, states, socketAt, nextSocket };
}

const joined = (seq, startedAt) => ({ type: 'joined', seq, channel: 'studio-a', startedAt });
const final = (seq, start, end, text) => ({ type: 'final', seq, start, end, text, words: [] });

test('viewer: URL, joined, backfill and live events as callbacks and as an async iterator', async () => {
  const { v, seen, states, nextSocket } = makeViewer();
  const iterated = [];
  const iterating = (async () => { for await (const e of v) iterated.push(e.seq); })();
  const socket = await nextSocket(0);
  assert.equal(socket.url, 'wss://example.test/v1/listen?channel=studio-a&token=tok');
  socket.open();
  socket.emit(joined(1, 'T1'));
  const first = await v.ready;
  assert.equal(first.resumed, false);
  socket.emit(final(2, 0.5, 1.5, 'one'));
  socket.emit({ type: 'volatile', seq: 3, start: 2, end: 2.5, text: 'tw' });
  socket.emit({ type: 'speech', seq: 4, state: 'started', at: 2 });
  socket.emit(final(5, 2, 3, 'two'));
  // A new publisher on the same connection: a new broadcast, its timeline at 0 again.
  socket.emit(joined(6, 'T2'));
  socket.emit(final(7, 0.2, 0.9, 'again'));
  assert.deepEqual(seen, ['joined false', 'final one', 'volatile', 'speech', 'final two', 'joined false', 'final again']);
  assert.equal(v.broadcasts, 2);
  assert.equal(v.state, 'open');
  assert.equal(v.lastSeq, 7);
  await v.close();
  assert.equal(socket.closedWith, 1000);
  await iterating;
  assert.deepEqual(iterated, [1, 2, 3, 4, 5, 6, 7]);
  // listen() was connecting before the callback was added: the first change it sees is 'open'.
  assert.deepEqual(states, ['open', 'closed']);
  assert.equal((await v.closed).error, null);
});

test('viewer: a dropped connection reconnects; the repeated backfill is not delivered twice', async () => {
  const { v, seen, states, nextSocket } = makeViewer();
  const delays = [];
  v.on('state', (s) => { if (s.state === 'reconnecting') delays.push([s.delay, s.code, s.error.code]); });
  const a = await nextSocket(0);
  a.open();
  a.emit(joined(1, 'T1'));
  a.emit(final(2, 0.5, 1.5, 'one'));
  a.emit({ type: 'volatile', seq: 3, start: 2, end: 2.5, text: 'tw' });
  a.drop(1006);
  assert.equal(v.state, 'reconnecting');
  const b = await nextSocket(1);
  b.open();
  b.emit(joined(1, 'T1')); // the same broadcast: backfill of what was seen, then more
  b.emit(final(2, 0.5, 1.5, 'one'));
  b.emit(final(3, 2, 3, 'two'));
  b.emit({ type: 'volatile', seq: 4, start: 3.2, end: 3.5, text: 'thr' });
  b.emit(final(5, 3.2, 4, 'three'));
  assert.deepEqual(seen, ['joined false', 'final one', 'volatile', 'joined true', 'final two', 'volatile', 'final three']);
  assert.equal(v.broadcasts, 1);
  // Dropped again while a new broadcast started: everything of the new one is delivered.
  b.drop(1001, true);
  const c = await nextSocket(2);
  c.open();
  c.emit(joined(1, 'T3'));
  c.emit(final(2, 0.5, 1.5, 'new one'));
  assert.deepEqual(seen.slice(7), ['joined false', 'final new one']);
  assert.equal(v.broadcasts, 2);
  assert.deepEqual(delays.map((d) => d.slice(1)), [[1006, 'connection_lost'], [1001, 'shutting_down']]);
  assert.ok(delays.every(([delay]) => delay > 0 && delay <= 0.008));
  assert.deepEqual(states, ['open', 'reconnecting', 'connecting', 'open', 'reconnecting', 'connecting', 'open']);
  await v.close();
});

test('viewer: backoff doubles up to maxDelay, 4008 retries at once, attempts reset on joined', async () => {
  const { v, nextSocket } = makeViewer({ minDelay: 0.001, maxDelay: 0.004 });
  const delays = [];
  v.on('state', (s) => { if (s.state === 'reconnecting') delays.push(s.delay); });
  const a = await nextSocket(0);
  a.open();
  a.emit(joined(1, 'T1'));
  a.drop(4008, true);
  (await nextSocket(1)).drop(1006); // never opened
  (await nextSocket(2)).drop(1006);
  (await nextSocket(3)).drop(1006);
  const e = await nextSocket(4);
  e.open();
  e.emit(joined(1, 'T1'));
  e.drop(1006);
  await nextSocket(5);
  assert.deepEqual(delays, [0, 0.002, 0.004, 0.004, 0.001]);
  await v.close();
});

test('viewer: no reconnect after 1000 or a protocol close; a server never reached is given up', async () => {
  const normal = makeViewer();
  const a = await normal.nextSocket(0);
  a.open();
  a.emit(joined(1, 'T1'));
  const iterating = (async () => { for await (const e of normal.v) void e; })();
  a.drop(1000, true);
  assert.equal(normal.v.state, 'closed');
  assert.equal((await normal.v.closed).error, null);
  await iterating; // ends without an error

  const refused = makeViewer();
  const b = await refused.nextSocket(0);
  b.open();
  b.emit(joined(1, 'T1'));
  b.drop(1008, true);
  const closed = await refused.v.closed;
  assert.equal(closed.code, 1008);
  assert.equal(closed.error.code, 'connection_lost');

  const unreachable = makeViewer({ firstAttempts: 2 });
  for (let i = 0; i < 3; i++) (await unreachable.nextSocket(i)).drop(1006);
  await assert.rejects(unreachable.v.ready, (e) => e.code === 'connection_failed');
  assert.equal(unreachable.v.state, 'closed');
  assert.equal(unreachable.socketAt(3), undefined, 'two reconnects, then it gives up');
  assert.deepEqual(unreachable.states, ['reconnecting', 'connecting', 'reconnecting', 'connecting', 'closed']);
});

test('viewer: close() while waiting to reconnect stops it; reconnectNow() skips the wait', async () => {
  const { v, nextSocket, socketAt } = makeViewer({ minDelay: 60, maxDelay: 60 });
  const a = await nextSocket(0);
  a.open();
  a.emit(joined(1, 'T1'));
  a.drop(1006);
  assert.equal(v.state, 'reconnecting');
  assert.ok(v.reconnectDelay >= 48);
  assert.equal(v.reconnectNow(), true);
  const b = await nextSocket(1);
  b.drop(1006);
  assert.equal(v.state, 'reconnecting');
  await v.close();
  await wait(5);
  assert.equal(socketAt(2), undefined);
  assert.equal(v.reconnectNow(), false);
});

test('helpers: listenUrl, captionsUrl, isChannelName, viewerShouldReconnect', () => {
  assert.equal(client.listenUrl('http://h:8080', 'a.b_c-1'), 'ws://h:8080/v1/listen?channel=a.b_c-1');
  assert.equal(client.listenUrl('wss://h/steno/v1/stream?x=1', 'c', { token: 't k' }),
    'wss://h/steno/v1/listen?channel=c&token=t+k');
  assert.equal(client.captionsUrl('wss://h/v1/listen', 'c', 'srt'), 'https://h/v1/channels/c/captions.srt');
  assert.equal(client.captionsUrl('http://h:1/', 'c', 'txt', { token: 'q' }), 'http://h:1/v1/channels/c/captions.txt?token=q');
  assert.throws(() => client.listenUrl('http://h', 'no spaces'), TypeError);
  assert.throws(() => client.captionsUrl('http://h', 'c', 'doc'), TypeError);
  for (const name of ['a', 'studio-a', 'A.b_9', 'x'.repeat(64)]) assert.equal(client.isChannelName(name), true, name);
  for (const name of ['', '.', '..', 'a b', 'a/b', 'é', 'x'.repeat(65), null]) assert.equal(client.isChannelName(name), false, name);
  for (const code of [1001, 1005, 1006, 1011, 1012, 4008, 4010]) assert.equal(client.viewerShouldReconnect(code), true, code);
  for (const code of [1000, 1003, 1008, 1009, 4400]) assert.equal(client.viewerShouldReconnect(code), false, code);
});

test('transcript: timestamps, text, WebVTT and SRT written as the server writes them', () => {
  const { timestamp, shortTime, clockLabel, toText, toWebVTT, toSRT } = transcript;
  assert.equal(timestamp(3661.5), '01:01:01.500');
  assert.equal(timestamp(0.0004, ','), '00:00:00,000');
  assert.equal(timestamp(0.0005), '00:00:00.001', 'half a millisecond rounds up, as on the server');
  assert.equal(timestamp(-3), '00:00:00.000');
  assert.equal(timestamp(NaN), '00:00:00.000');
  assert.equal(timestamp(360000), '100:00:00.000');
  assert.equal(shortTime(62.345), '1:02.35');
  assert.equal(clockLabel(62.9), '1:02');
  assert.equal(clockLabel(3725), '1:02:05');
  const finals = [
    { start: 0.5, end: 1.25, text: 'hello <world> & you' },
    { start: 2, end: 2, text: '   ' },
    { start: 3, end: 4, text: 'second  line' },
  ];
  // The expected texts are what Captions.swift renders for the same finals (a cue lasts at
  // least a second).
  assert.equal(toText(finals),
    '[00:00:00.500 → 00:00:01.250] hello <world> & you\n[00:00:02.000 → 00:00:02.000] \n[00:00:03.000 → 00:00:04.000] second line\n');
  assert.equal(toWebVTT(finals),
    'WEBVTT\n\n00:00:00.500 --> 00:00:01.500\nhello &lt;world&gt; &amp; you\n\n00:00:03.000 --> 00:00:04.000\nsecond line\n');
  assert.equal(toSRT(finals),
    '1\n00:00:00,500 --> 00:00:01,500\nhello <world> & you\n\n2\n00:00:03,000 --> 00:00:04,000\nsecond line\n');
  assert.equal(toWebVTT([]), 'WEBVTT\n');
  assert.equal(toSRT([]), '');
  assert.equal(toText([]), '');
});

test('transcript: cues filled greedily, lines balanced, times from words or shared by characters', () => {
  const { toCues, toWebVTT } = transcript;
  // Without word times: a cue of two balanced lines (the longer one as short as can be),
  // the rest in the next cue, times by character position (as Captions.swift renders them).
  const text = 'had he married a more amiable woman he might have been made still more respectable than he was';
  assert.equal(toWebVTT([{ start: 10, end: 14, text }, {
    start: 20, end: 21, text: 'one two three',
    words: [{ word: 'one', start: 2, end: 20.2 }, { word: 'two three', start: 20.3, end: 20.9 }],
  }]),
  'WEBVTT\n\n00:00:10.000 --> 00:00:12.979\nhad he married a more amiable woman\nhe might have been made still more\n\n' +
  '00:00:13.021 --> 00:00:14.021\nrespectable than he was\n\n' +
  '00:00:20.000 --> 00:00:21.000\none two three\n');

  // Balanced, where a greedy wrap would fill the top line (42 characters) and leave 12 below.
  const balanced = toCues([{ start: 0, end: 1, text: 'one two three four five six seven eight nine ten eleven' }]);
  assert.deepEqual(balanced.map((c) => c.lines), [['one two three four five six', 'seven eight nine ten eleven']]);
  const tie = toCues([{ start: 0, end: 1, text: `${'x'.repeat(20)} y ${'z'.repeat(20)}` }]);
  assert.deepEqual(tie[0].lines, ['x'.repeat(20), `y ${'z'.repeat(20)}`], 'ties go to the shorter top line');
  const long = toCues([{ start: 0, end: 1, text: `${'x'.repeat(50)} y` }]);
  assert.deepEqual(long.map((c) => c.lines), [['x'.repeat(50), 'y']], 'a word longer than a line gets its own');

  // Long finals become cues of at most two lines of 42 characters, cut at word times.
  const words = Array.from({ length: 30 }, (_, i) => ({ word: `word${i}`, start: 10 + i * 0.5, end: 10.4 + i * 0.5 }));
  const timed = toCues([{ start: 9.8, end: 25, text: words.map((w) => w.word).join(' '), words }]);
  assert.ok(timed.length > 1);
  for (const cue of timed) {
    assert.ok(cue.lines.length <= 2 && cue.lines.every((l) => l.length <= 42), JSON.stringify(cue));
  }
  assert.equal(timed[0].start, 9.8, 'the first cue starts with the final');
  assert.equal(timed.at(-1).end, 25, 'the last cue ends with the final');
  const firstOfSecond = Number(timed[1].lines[0].split(' ')[0].slice(4));
  assert.equal(timed[1].start, 10 + firstOfSecond * 0.5, 'a cue starts at its first word');
  const lastOfFirst = Number(timed[0].lines.at(-1).split(' ').at(-1).slice(4));
  assert.equal(timed[0].end, 10.4 + lastOfFirst * 0.5, 'and ends at its last word');
  assert.deepEqual(timed.flatMap((c) => c.lines.join(' ').split(' ')), words.map((w) => w.word));

  // Cues never run backwards: a final that starts before the previous one ended starts at its
  // end, and lasts a second.
  const clamped = toCues([{ start: 0, end: 2, text: 'first' }, { start: 1.5, end: 1.6, text: 'second' }]);
  assert.deepEqual(clamped.map((c) => [c.start, c.end]), [[0, 2], [2, 3]]);
  // Lengths are counted in characters as people see them (grapheme clusters), as in Swift.
  const accents = toCues([{ start: 0, end: 1, text: `${'e\u0301'.repeat(42)}` }]);
  assert.equal(accents[0].lines.length, 1);
});

test('transcript: the cues, WebVTT and SRT of Captions.swift for random finals and layouts, byte for byte', async () => {
  const { readFile } = await import('node:fs/promises');
  const cases = JSON.parse(await readFile(new URL('./data/caption-rules.json', import.meta.url), 'utf8'));
  assert.ok(cases.length >= 40);
  for (const [index, c] of cases.entries()) {
    assert.equal(transcript.toWebVTT(c.finals, c.layout), c.vtt, `case ${index} (WebVTT)`);
    assert.equal(transcript.toSRT(c.finals, c.layout), c.srt, `case ${index} (SRT)`);
  }
});

test('transcript: cues given as finals come are the cues of the whole list', async () => {
  const { readFile } = await import('node:fs/promises');
  const cases = JSON.parse(await readFile(new URL('./data/caption-rules.json', import.meta.url), 'utf8'));
  for (const c of cases) {
    const builder = new transcript.CueBuilder(c.layout);
    const cues = [];
    for (const final of c.finals) {
      cues.push(...builder.settle(final.start), ...builder.add(final));
    }
    cues.push(...builder.finish());
    assert.deepEqual(cues, transcript.toCues(c.finals, c.layout));
    let end = 0;
    for (const cue of cues) {
      assert.ok(cue.start >= end, 'no overlap');
      assert.ok(cue.end - cue.start >= c.layout.minDuration - 1e-9 && cue.end - cue.start <= c.layout.maxDuration + 1e-9);
      end = cue.end;
    }
  }
});

// ---- StenoPublisher ------------------------------------------------------------------------

const { StenoPublisher } = client;

/** A scripted `fetch`: answers from `answers` in turn (the last one repeats); records URLs. */
function scriptedFetch(answers) {
  const urls = [];
  const fetch = async (url) => {
    urls.push(url);
    const answer = answers.length > 1 ? answers.shift() : answers[0];
    if (answer === 'unreachable') throw new TypeError('fetch failed');
    const { status, body = null, headers = {} } = answer;
    return {
      status,
      headers: { get: (name) => headers[name.toLowerCase()] ?? null },
      json: async () => { if (body === null) throw new SyntaxError('not JSON'); return body; },
    };
  };
  return { fetch, urls };
}

const full = (retryAfter) => ({ status: 503, body: { status: 'full', retryAfter }, headers: { 'retry-after': '5' } });

/** A publisher on scripted sockets with a fast backoff, and what it reported. */
function makePublisher(options = {}, answers = [{ status: 426 }]) {
  const before = ScriptedSocket.instances.length;
  const probe = scriptedFetch(answers);
  const p = new StenoPublisher('http://example.test:8080', {
    WebSocket: ScriptedSocket, fetch: probe.fetch, token: 'tok', minDelay: 0.001, maxDelay: 0.008,
    restartDelay: 0.004, jitter: 0, ...options,
  });
  const states = [];
  const seen = [];
  p.on('state', (s) => states.push(s.state === 'reconnecting' ? `reconnecting ${s.reason}` : s.state));
  p.on('event', (e) => seen.push(`${e.type}@${e.offset}`));
  const socketAt = (i) => ScriptedSocket.instances[before + i];
  const nextSocket = async (i) => {
    for (let n = 0; n < 300 && !socketAt(i); n++) await wait(2);
    assert.ok(socketAt(i), `no connection attempt ${i + 1}`);
    return socketAt(i);
  };
  const admit = (socket, session = 's') => { socket.open(); socket.emit({ type: 'ready', seq: 1, session }); };
  return { p, states, seen, socketAt, nextSocket, admit, probe };
}

const pcm = (seconds, value = 1) => new Int16Array(Math.round(seconds * 16000)).fill(value);

test('publisher: audio and finalize held until ready, then sent in order; events carry the offset', async () => {
  const { p, states, seen, nextSocket, admit } = makePublisher();
  p.sendAudio(pcm(0.5)); // connects
  const finalized = p.finalize();
  p.sendAudio(pcm(0.25, 2));
  const socket = await nextSocket(0);
  assert.equal(socket.url, 'ws://example.test:8080/v1/stream?token=tok');
  assert.equal(p.bufferedSeconds, 0.75);
  admit(socket);
  assert.equal((await p.ready).offset, 0);
  assert.deepEqual(socket.sent.slice(1).map((m) => (m instanceof Uint8Array ? m.length : m.type)), [16000, 'finalize', 8000]);
  assert.equal(p.bufferedSeconds, 0);
  p.sendAudio(pcm(0.25, 3)); // straight to the socket now
  assert.equal(socket.frames.length, 3);
  socket.emit({ type: 'finalized', seq: 2, through: 0.5 });
  assert.deepEqual(await finalized, { type: 'finalized', seq: 2, through: 0.5, offset: 0 });
  assert.equal(p.timeline, 1);
  const ended = p.end();
  socket.emit({ type: 'ended', seq: 3, duration: 1 });
  socket.drop(1000, true);
  assert.equal((await ended).duration, 1);
  assert.equal((await p.closed).error, null);
  assert.deepEqual(states, ['connecting', 'open', 'ending', 'closed']);
  assert.deepEqual(seen, ['ready@0', 'finalized@0', 'ended@0']);
});

test('publisher: a dropped connection reconnects and sends what was said meanwhile; offsets continue', async () => {
  const { p, states, seen, nextSocket, admit } = makePublisher();
  p.start();
  const a = await nextSocket(0);
  admit(a, 'one'); // a server without resume: no resumeToken
  p.sendAudio(pcm(0.5));
  p.sendAudio(pcm(0.5, 2));
  a.emit({ type: 'final', seq: 2, start: 0.1, end: 0.5, text: 'first' });
  a.drop(1006);
  assert.equal(p.state, 'reconnecting');
  assert.equal(p.reason, 'lost');
  p.sendAudio(pcm(0.5, 7)); // held while away
  const b = await nextSocket(1);
  assert.equal(b.frames.length, 0);
  admit(b, 'two');
  assert.equal(b.texts[0].type, 'start', 'a new session');
  // What no final of the old session covered (it may never have arrived), then what was held.
  assert.deepEqual(b.frames.map((f) => [f.length, f[0]]), [[16000, 2], [16000, 7]]);
  assert.equal(p.offset, 0.5, 'the second session starts where the first one was last captioned');
  assert.equal(p.session, 'two');
  b.emit({ type: 'final', seq: 2, start: 0, end: 0.4, text: 'second' });
  assert.deepEqual(seen, ['ready@0', 'final@0', 'ready@0.5', 'final@0.5']);
  assert.deepEqual(states, ['connecting', 'open', 'reconnecting lost', 'connecting', 'open']);
  await p.close();
});

test('publisher: a full server is waited for as long as it takes (Retry-After), audio kept and bounded', async () => {
  const { p, states, nextSocket, admit, probe } = makePublisher({ bufferSeconds: 1, firstAttempts: 1 }, [full(0.003)]);
  const dropped = [];
  p.on('dropped', (d) => dropped.push(d.reason));
  const delays = [];
  p.on('state', (s) => { if (s.state === 'reconnecting') delays.push([s.reason, s.delay, s.retryAfter]); });
  p.sendAudio(pcm(0.5));
  for (let i = 0; i < 5; i++) {
    (await nextSocket(i)).drop(1006); // refused before it opened
    p.sendAudio(pcm(0.5, i + 2));
  }
  const last = await nextSocket(5);
  assert.equal(probe.urls[0], 'http://example.test:8080/v1/stream?token=tok', 'the same address, over HTTP');
  assert.equal(probe.urls.length, 5);
  assert.deepEqual(delays.map(([reason]) => reason), ['full', 'full', 'full', 'full', 'full']);
  assert.ok(delays.every(([, delay, retryAfter]) => delay >= 0.003 && retryAfter === 0.003));
  assert.ok(p.bufferedSeconds <= 1 && p.bufferedSeconds >= 0.5, `held ${p.bufferedSeconds}`);
  assert.equal(p.droppedSeconds, 2, 'the oldest audio went first');
  assert.ok(dropped.every((r) => r === 'buffer_full'));
  admit(last);
  assert.deepEqual(last.frames.map((f) => f[0]), [5, 6], 'the latest second of audio, in order');
  assert.equal(p.offset, 2);
  assert.equal(states.at(-1), 'open');
  await p.close();
});

test('publisher: a refused token stops it at once; so does a refused origin', async () => {
  const { p, nextSocket, socketAt, probe } = makePublisher({}, [{ status: 401, headers: { 'www-authenticate': 'Bearer' } }]);
  p.sendAudio(pcm(0.1));
  (await nextSocket(0)).drop(1006);
  const closed = await p.closed;
  assert.equal(closed.error.code, 'unauthorized');
  assert.equal(closed.error.status, 401);
  await assert.rejects(p.ready, (e) => e.code === 'unauthorized');
  await wait(20);
  assert.equal(socketAt(1), undefined, 'no retry');
  assert.equal(probe.urls.length, 1);
  assert.throws(() => p.sendAudio(pcm(0.1)), StenoError);

  const origin = makePublisher({}, [{ status: 403 }]);
  origin.p.start();
  (await origin.nextSocket(0)).drop(1006);
  assert.equal((await origin.p.closed).error.code, 'forbidden');
});

test('publisher: a restarting server (1001, then gone, then draining) is waited for until it is back', async () => {
  const answers = ['unreachable', 'unreachable', 'unreachable', 'unreachable', { status: 503, body: { status: 'draining', retryAfter: 0.002 } }];
  const { p, states, nextSocket, admit } = makePublisher({ firstAttempts: 1, maxAttempts: 1 }, answers);
  p.start();
  admit(await nextSocket(0));
  p.sendAudio(pcm(0.2));
  const a = ScriptedSocket.instances.at(-1);
  a.emit({ type: 'final', seq: 2, start: 0, end: 0.2, text: 'all of it' }); // finals first, then the error
  a.emit({ type: 'error', seq: 3, code: 'shutting_down', message: 'server shutting down', fatal: true });
  a.drop(1001, true);
  assert.equal(p.reason, 'restarting');
  p.sendAudio(pcm(0.2, 9));
  for (let i = 1; i <= 5; i++) (await nextSocket(i)).drop(1006);
  const back = await nextSocket(6);
  admit(back, 'after');
  assert.deepEqual(back.frames.map((f) => f[0]), [9]);
  assert.deepEqual(states.filter((s) => s.startsWith('reconnecting')), Array(6).fill('reconnecting restarting'),
    'more tries than maxAttempts: a restart is waited for');
  assert.equal(p.state, 'open');
  await p.close();
});

test('publisher: a server never reached is given up after firstAttempts', async () => {
  const { p, states, nextSocket, socketAt } = makePublisher({ firstAttempts: 2 }, ['unreachable']);
  p.sendAudio(pcm(0.1));
  for (let i = 0; i < 3; i++) (await nextSocket(i)).drop(1006);
  const closed = await p.closed;
  assert.equal(closed.error.code, 'connection_failed');
  assert.equal(socketAt(3), undefined);
  assert.deepEqual(states, ['connecting', 'reconnecting unreachable', 'connecting', 'reconnecting unreachable', 'connecting', 'closed']);
  assert.ok(p.droppedSeconds > 0.09, 'what it held was not delivered, and says so');
});

test('publisher: Opus refused → PCM at the same rate, once, with a format event', async () => {
  const { p, nextSocket, admit } = makePublisher({ audio: { encoding: 'opus', sampleRate: 24000, channels: 1 }, pcmFallback: true });
  const formats = [];
  p.on('format', (f) => formats.push([f.previous.encoding, f.audio.encoding, f.audio.sampleRate]));
  p.sendAudio(new Uint8Array([0x78, 1, 2]));
  const a = await nextSocket(0);
  a.open();
  assert.equal(a.texts[0].audio.encoding, 'opus');
  a.emit({ type: 'error', seq: 1, code: 'unsupported_audio', message: 'no opus', fatal: true });
  a.drop(1003, true);
  assert.deepEqual(formats, [['opus', 'pcm_s16le', 24000]]);
  assert.equal(p.droppedSeconds, 0.02, 'held Opus cannot go into a PCM session');
  const b = await nextSocket(1);
  b.open();
  assert.deepEqual(b.texts[0].audio, { encoding: 'pcm_s16le', sampleRate: 24000, channels: 1 });
  p.sendAudio(new Float32Array(240));
  admit(b);
  assert.deepEqual(b.frames.map((f) => f.length), [480]);
  // PCM refused too: that is the end.
  b.emit({ type: 'error', seq: 2, code: 'unsupported_audio', message: 'no', fatal: true });
  b.drop(1003, true);
  assert.equal((await p.closed).error.code, 'unsupported_audio');
});

test('publisher: paused, a drop or an idle close waits for audio; end() while away gives up what it held', async () => {
  const { p, states, nextSocket, socketAt, admit } = makePublisher();
  p.start();
  admit(await nextSocket(0));
  p.pause();
  ScriptedSocket.instances.at(-1).drop(4010, true);
  assert.equal(p.state, 'idle');
  await wait(20);
  assert.equal(socketAt(1), undefined, 'no reconnect without audio');
  assert.equal(await p.finalize(), null, 'nothing to finalize');
  p.sendAudio(pcm(0.1)); // audio again: a new session
  const b = await nextSocket(1);
  b.drop(1006); // never opened: the probe says a WebSocket would be accepted; retry
  p.sendAudio(pcm(0.1));
  assert.equal(p.state === 'connecting' || p.state === 'reconnecting', true);
  await wait(0);
  const ended = await p.end();
  assert.equal(ended, null);
  assert.equal(p.state, 'closed');
  assert.ok(p.droppedSeconds >= 0.2 - 1e-9);
  assert.deepEqual(states.slice(0, 4), ['connecting', 'open', 'idle', 'connecting']);
  await wait(20);
  assert.equal(socketAt(3), undefined, 'no reconnect after end()');
});

test('publisher: cancel while connecting discards the held audio; 4009 reconnects at once', async () => {
  const a = makePublisher();
  a.p.sendAudio(pcm(0.3));
  const socket = await a.nextSocket(0);
  const cancelled = a.p.cancel();
  assert.equal(a.p.bufferedSeconds, 0);
  a.admit(socket);
  assert.deepEqual(socket.sent.slice(1).map((m) => (m instanceof Uint8Array ? 'audio' : m.type)), ['cancel']);
  socket.emit({ type: 'cancelled', seq: 2, through: 0 });
  socket.drop(1000, true);
  assert.equal((await cancelled).through, 0);

  const e = makePublisher();
  e.p.sendAudio(pcm(0.3));
  const early = await e.nextSocket(0);
  const ending = e.p.end(); // before the session is ready: the held audio goes first, then `end`
  assert.equal(e.p.state, 'ending');
  assert.throws(() => e.p.sendAudio(pcm(0.1)), StenoError);
  e.admit(early);
  assert.deepEqual(early.sent.slice(1).map((m) => (m instanceof Uint8Array ? m.length : m.type)), [9600, 'end']);
  early.emit({ type: 'ended', seq: 2, duration: 0.3 });
  early.drop(1000, true);
  assert.equal((await ending).duration, 0.3);
  assert.deepEqual(e.states, ['connecting', 'ending', 'closed']);

  const b = makePublisher({ minDelay: 60, maxDelay: 60 });
  const delays = [];
  b.p.on('state', (s) => { if (s.state === 'reconnecting') delays.push([s.reason, s.delay]); });
  b.p.start();
  b.admit(await b.nextSocket(0));
  b.p.sendAudio(pcm(0.1));
  ScriptedSocket.instances.at(-1).drop(4009, true);
  await b.nextSocket(1);
  assert.deepEqual(delays, [['session_limit', 0]]);
  await b.p.close();
});

test('a resuming client sends resume, waits for resumed, then continues the timeline; gap; resume_failed', async () => {
  const { c, ready, socket } = make({ resume: { session: 's1', resumeToken: 'secret', after: 7 } });
  c.sendAudio(new Uint8Array([1, 2]));
  socket.open();
  assert.deepEqual(socket.texts, [{ type: 'resume', session: 's1', resumeToken: 'secret', after: 7 }]);
  assert.match(socket.url, /[?&]resume=s1(&|$)/, 'the handshake names the session, for admission');
  assert.equal(socket.frames.length, 0, 'nothing but resume before resumed');
  socket.emit({ type: 'final', seq: 8, start: 2, end: 2.4, text: 'replayed' });
  assert.equal(c.state, 'connecting');
  socket.emit({ type: 'resumed', seq: 9, session: 's1', received: 2.5 });
  assert.equal((await ready).type, 'resumed');
  assert.equal(c.state, 'ready');
  assert.equal(c.session, 's1');
  assert.deepEqual(socket.frames.map((f) => [...f]), [[1, 2]]);
  assert.equal(c.sentSeconds, 2.5 + 1 / 16000, 'the session timeline goes on from received');
  const gap = c.gap(0.5);
  assert.deepEqual(socket.texts.at(-1), { type: 'gap', duration: 0.5 });
  socket.emit({ type: 'gap', seq: 10, start: 2.5001, end: 3.0001 });
  assert.equal((await gap).end, 3.0001);
  await assert.rejects(c.gap(0), TypeError);

  const refused = make({ resume: { session: 'gone', resumeToken: 'x', after: 3 } });
  refused.socket.open();
  refused.socket.emit({ type: 'error', seq: 1, code: 'resume_failed', message: 'no session "gone"', fatal: true });
  refused.socket.drop(4404, true);
  const closed = await refused.c.closed;
  assert.equal(closed.error.code, 'resume_failed');
  assert.equal(closed.error.closeCode, 4404);
  assert.equal(client.shouldReconnect(4404), true, 'a new session helps');
  assert.match(client.describeError(4404), /could no longer continue/);
});

/** `ready` of a server that keeps sessions for resume. */
const resumable = (session = 's', resumeSeconds = 30) => ({
  type: 'ready', seq: 1, session, resumeToken: `token-${session}`, limits: { resumeSeconds },
});
const firstBytes = (socket) => socket.sent.map((m) => (m instanceof Uint8Array ? m[0] : m.type));

test('publisher: a dropped connection resumes the session; what the server lacks is sent again, replayed events once', async () => {
  const { p, states, seen, nextSocket } = makePublisher();
  const finals = [];
  const resumed = [];
  p.on('final', (e) => finals.push(e.text));
  p.on('resumed', (e) => resumed.push(e));
  p.start();
  const a = await nextSocket(0);
  a.open();
  a.emit(resumable('one'));
  for (let i = 1; i <= 5; i++) p.sendAudio(pcm(0.1, i)); // five messages of 0.1 s
  a.emit({ type: 'progress', seq: 2, received: 0.2, analyzed: 0.1 }); // the server has two of them
  a.emit({ type: 'final', seq: 3, start: 0, end: 0.15, text: 'one' });
  a.drop(1006);
  assert.equal(p.state, 'reconnecting');
  assert.equal(Math.round(p.bufferedSeconds * 1000), 300, 'what the server may lack is kept');
  p.sendAudio(pcm(0.1, 6)); // said while away
  const b = await nextSocket(1);
  b.open();
  assert.deepEqual(b.texts, [{ type: 'resume', session: 'one', resumeToken: 'token-one', after: 3 }]);
  assert.equal(b.frames.length, 0, 'nothing before resumed');
  // The events after `after` again (one the publisher has would not be shown twice either),
  // then resumed: the server got one more message than it had said.
  b.emit({ type: 'final', seq: 3, start: 0, end: 0.15, text: 'one' });
  b.emit({ type: 'final', seq: 4, start: 0.2, end: 0.3, text: 'two' });
  b.emit({ type: 'resumed', seq: 5, session: 'one', received: 0.3 });
  assert.deepEqual(firstBytes(b), ['resume', 4, 5, 6], 'from received on, without a gap: sent again, then held');
  assert.deepEqual(finals, ['one', 'two']);
  assert.deepEqual(seen, ['ready@0', 'progress@0', 'final@0', 'final@0', 'resumed@0']);
  assert.equal(resumed[0].lost, 0);
  assert.equal(Math.round(resumed[0].resent * 1000), 200);
  assert.deepEqual(states, ['connecting', 'open', 'reconnecting lost', 'connecting', 'open']);
  assert.deepEqual([p.session, p.sessions, p.resumes, p.offset, p.lastSeq, p.droppedSeconds], ['one', 1, 1, 0, 5, 0]);
  p.sendAudio(pcm(0.1, 7));
  assert.deepEqual(firstBytes(b).slice(-1), [7]);

  // Dropped again, with everything acknowledged: nothing to send again, same session.
  b.emit({ type: 'progress', seq: 6, received: 0.7, analyzed: 0.7 });
  b.drop(1006);
  assert.equal(p.bufferedSeconds, 0);
  const c = await nextSocket(2);
  c.open();
  assert.equal(c.texts[0].after, 6);
  c.emit({ type: 'resumed', seq: 7, session: 'one', received: 0.7 });
  assert.deepEqual(firstBytes(c), ['resume']);
  assert.equal(p.resumes, 2);
  await p.close();
});

test('publisher: audio no longer kept is declared as a gap before the rest, and counted as lost', async () => {
  const { p, nextSocket } = makePublisher({ bufferSeconds: 0.35 });
  const dropped = [];
  const resumed = [];
  p.on('dropped', (d) => dropped.push([d.reason, Math.round(d.seconds * 1000)]));
  p.on('resumed', (e) => resumed.push(e));
  p.start();
  const a = await nextSocket(0);
  a.open();
  a.emit(resumable());
  for (let i = 1; i <= 3; i++) p.sendAudio(pcm(0.1, i)); // sent, never acknowledged
  a.drop(1006);
  for (let i = 4; i <= 7; i++) p.sendAudio(pcm(0.1, i)); // held while away: 1, 2, 3 and then 4 give way
  assert.deepEqual(dropped, [['buffer_full', 100]], 'only the one never sent is counted now');
  const b = await nextSocket(1);
  b.open();
  b.emit({ type: 'resumed', seq: 2, session: 's', received: 0.1 }); // it had 1
  assert.deepEqual(firstBytes(b), ['resume', 'gap', 5, 6, 7]);
  assert.equal(Math.round(b.texts[1].duration * 1000), 300, 'from received to the first audio kept');
  assert.equal(Math.round(resumed[0].lost * 1000), 300);
  assert.deepEqual(dropped, [['buffer_full', 100], ['connection_lost', 200]], '2 and 3 never arrived');
  assert.equal(Math.round(p.droppedSeconds * 1000), 300);
  b.emit({ type: 'gap', seq: 3, start: 0.1, end: 0.4 });
  b.emit({ type: 'progress', seq: 4, received: 0.7, analyzed: 0.6 }); // the timelines agree: all acknowledged
  b.drop(1006);
  assert.equal(p.bufferedSeconds, 0);
  await p.close();
});

test('publisher: a finalize the server may not have got is sent again in its place; answers resolve in order', async () => {
  const { p, nextSocket } = makePublisher();
  p.start();
  const a = await nextSocket(0);
  a.open();
  a.emit(resumable());
  p.sendAudio(pcm(0.1, 1));
  const f1 = p.finalize();
  p.sendAudio(pcm(0.1, 2));
  const f2 = p.finalize();
  p.sendAudio(pcm(0.1, 3));
  const f3 = p.finalize(0.25);
  a.emit({ type: 'progress', seq: 2, received: 0.2, analyzed: 0 }); // it has f1 (audio after it arrived)
  a.drop(1006);
  const b = await nextSocket(1);
  b.open();
  b.emit({ type: 'resumed', seq: 3, session: 's', received: 0.2 });
  // f2 sits exactly at received: it may not have arrived, so it goes again; then 3 and f3.
  assert.deepEqual(firstBytes(b), ['resume', 'finalize', 3, 'finalize']);
  assert.deepEqual(b.texts.at(-1), { type: 'finalize', through: 0.25 });
  b.emit({ type: 'finalized', seq: 4, through: 0.1 });
  b.emit({ type: 'finalized', seq: 5, through: 0.2 });
  b.emit({ type: 'finalized', seq: 6, through: 0.25 });
  assert.deepEqual([(await f1).through, (await f2).through, (await f3).through], [0.1, 0.2, 0.25]);
  await p.close();
});

test('publisher: a refused resume, a server restart or too late a reconnect start a new session', async () => {
  const { p, nextSocket } = makePublisher({ minDelay: 0.03, maxDelay: 0.03 });
  const errors = [];
  const readies = [];
  p.on('error', (e) => errors.push(e.code));
  p.on('ready', (e) => readies.push(e));
  p.start();
  const a = await nextSocket(0);
  a.open();
  a.emit(resumable('one'));
  for (let i = 1; i <= 3; i++) p.sendAudio(pcm(0.1, i));
  a.emit({ type: 'final', seq: 2, start: 0, end: 0.1, text: 'one' });
  a.drop(1006);
  const b = await nextSocket(1);
  b.open();
  assert.equal(b.texts[0].type, 'resume');
  b.emit({ type: 'error', seq: 1, code: 'resume_failed', message: 'no session "one" is waiting', fatal: true });
  b.drop(4404, true);
  const c = await nextSocket(2);
  c.open();
  assert.equal(c.texts[0].type, 'start', 'a new session at once');
  c.emit(resumable('two'));
  assert.deepEqual(firstBytes(c), ['start', 2, 3], 'what no final covered');
  assert.equal(Math.round(p.offset * 1000), 100);
  assert.deepEqual(readies.map((r) => [r.session, r.resumeFailed ?? false]), [['one', false], ['two', true]]);
  assert.deepEqual(errors, [], 'the refused resume is not an error of the publisher');

  // A restart ends the session on the server: a new session, not a resume.
  p.sendAudio(pcm(0.1, 4));
  c.emit({ type: 'final', seq: 2, start: 0, end: 0.3, text: 'two' });
  c.emit({ type: 'error', seq: 3, code: 'shutting_down', message: 'server shutting down', fatal: true });
  c.drop(1001, true);
  const d = await nextSocket(3);
  d.open();
  assert.equal(d.texts[0].type, 'start');
  d.emit(resumable('three', 0.005));
  p.sendAudio(pcm(0.1, 5));
  d.drop(1006); // the next try, 30 ms later, is past its limits.resumeSeconds
  const e = await nextSocket(4);
  e.open();
  assert.equal(e.texts[0].type, 'start', 'the server no longer keeps it');
  e.emit(resumable('four'));
  assert.deepEqual(firstBytes(e), ['start', 5]);
  assert.equal(p.sessions, 4);
  await p.close();
});

test('publisher: a resume refused at the handshake while the server answers starts a new session; with no answer it resumes', async () => {
  // The probe answers (426: a new session would be taken), as a balancer does when the instance
  // that ran the session is gone; then, for the second drop, nothing answers (the network is down).
  const { p, nextSocket } = makePublisher({ minDelay: 0.003, maxDelay: 0.003 }, [{ status: 426 }, 'unreachable']);
  p.start();
  const a = await nextSocket(0);
  a.open();
  a.emit(resumable('one'));
  p.sendAudio(pcm(0.1, 1));
  a.emit({ type: 'final', seq: 2, start: 0, end: 0.05, text: 'one' });
  a.drop(1006);
  const b = await nextSocket(1);
  assert.match(b.url, /resume=one/);
  b.drop(1006); // refused before it opened
  const c = await nextSocket(2);
  c.open();
  assert.equal(c.texts[0].type, 'start', 'a new session, not the dead one again');
  assert.equal(c.texts[0].continues, undefined, 'no channel: nothing to take over');
  c.emit(resumable('two'));
  assert.deepEqual(firstBytes(c), ['start', 1], 'the audio no final covered');
  c.drop(1006);
  const d = await nextSocket(3);
  assert.match(d.url, /resume=two/);
  d.drop(1006); // refused, and the probe gets no answer: the network, not the server
  const e = await nextSocket(4);
  assert.match(e.url, /resume=two/, 'still resuming');
  await p.close();
});

test('publisher: on a channel, the session after a lost one continues it, with its token', async () => {
  const { p, nextSocket } = makePublisher({ channel: 'hall', minDelay: 0.003, maxDelay: 0.003 }, [{ status: 426 }]);
  p.start();
  const a = await nextSocket(0);
  a.open();
  assert.equal(a.texts[0].continues, undefined, 'the first session continues nothing');
  a.emit(resumable('one'));
  p.sendAudio(pcm(0.1, 1));
  a.drop(1006);
  const b = await nextSocket(1);
  b.drop(1006); // its instance is gone: the resume is refused before it opens
  const c = await nextSocket(2);
  c.open();
  assert.equal(c.texts[0].type, 'start');
  assert.equal(c.texts[0].channel, 'hall');
  assert.deepEqual(c.texts[0].continues, { session: 'one', resumeToken: 'token-one' });
  await p.close();
});

test('publisher: Opus is sent again packet by packet from where the server is', async () => {
  const { p, nextSocket } = makePublisher({ audio: { encoding: 'opus', sampleRate: 48000, channels: 1 } });
  p.start();
  const a = await nextSocket(0);
  a.open();
  a.emit(resumable());
  const packet = (n) => new Uint8Array([0x78, n]); // 20 ms each
  for (let i = 1; i <= 6; i++) p.sendAudio(packet(i));
  a.emit({ type: 'progress', seq: 2, received: 0.04, analyzed: 0 });
  a.drop(1006);
  const b = await nextSocket(1);
  b.open();
  b.emit({ type: 'resumed', seq: 3, session: 's', received: 0.08 });
  assert.deepEqual(b.frames.map((f) => f[1]), [5, 6]);
  await p.close();
});

test('probeStream: what a plain GET of the stream address says', async () => {
  const ask = (answer) => client.probeStream('wss://h.example/v1/stream?token=t', { fetch: scriptedFetch([answer]).fetch });
  assert.equal(client.probeUrl('wss://h.example/v1/stream?token=t'), 'https://h.example/v1/stream?token=t');
  assert.deepEqual(await ask(full(7)), { reason: 'full', status: 503, retryAfter: 7 });
  assert.deepEqual(await ask({ status: 503, headers: { 'retry-after': '12' } }), { reason: 'full', status: 503, retryAfter: 12 });
  assert.deepEqual(await ask({ status: 503, body: { status: 'draining', retryAfter: 3 } }), { reason: 'draining', status: 503, retryAfter: 3 });
  assert.deepEqual(await ask({ status: 401 }), { reason: 'unauthorized', status: 401, retryAfter: null });
  assert.deepEqual(await ask({ status: 403 }), { reason: 'forbidden', status: 403, retryAfter: null });
  assert.deepEqual(await ask({ status: 426 }), { reason: 'accepting', status: 426, retryAfter: null });
  assert.deepEqual(await ask({ status: 404 }), { reason: 'unknown', status: 404, retryAfter: null });
  assert.deepEqual(await ask('unreachable'), { reason: 'unreachable', status: null, retryAfter: null });
  assert.deepEqual(await client.probeStream('ws://h/v1/stream', { fetch: null }), { reason: 'unreachable', status: null, retryAfter: null });
});

test('viewer: a refused token ends it at once with a plain reason', async () => {
  const urls = [];
  const refused = makeViewer({ fetch: async (url) => { urls.push(url); return { status: 401, headers: { get: () => null }, json: async () => { throw new SyntaxError('x'); } }; } });
  (await refused.nextSocket(0)).drop(1006);
  const closed = await refused.v.closed;
  assert.equal(closed.error.code, 'unauthorized');
  assert.deepEqual(urls, ['https://example.test/v1/listen?channel=studio-a&token=tok']);
  assert.equal(refused.socketAt(1), undefined);
  assert.match(client.describeError('unauthorized'), /refused the access token/);
});

test('page: what it says after a resume, with the seconds lost', () => {
  assert.equal(reconnectedMessage(0), 'Reconnected; nothing was lost.');
  assert.equal(reconnectedMessage(0.0004), 'Reconnected; nothing was lost.', 'below what a person could miss');
  assert.equal(reconnectedMessage(3.24), 'Reconnected; 3.2 s of audio could not be sent again and were lost.');
  assert.equal(reconnectedMessage(1), 'Reconnected; 1.0 s of audio could not be sent again and was lost.');
  assert.equal(reconnectedMessage(42.6), 'Reconnected; 43 s of audio could not be sent again and were lost.');
});

// ---- silence suppression ----------------------------------------------------------------------

/**
 * 0.5 s of quiet noise, 1 s loud, 3 s quiet, 1 s loud, 12 s quiet at 16 kHz: the signal of
 * Tests/StenoAudioTests/SilenceSuppressorTests.swift, sample for sample.
 */
function suppressionSignal() {
  const rate = 16000;
  const out = [];
  let state = 12345;
  const quiet = (seconds) => {
    for (let i = 0; i < seconds * rate; i++) {
      state = (Math.imul(state, 1664525) + 1013904223) >>> 0;
      out.push((((state >>> 16) % 2001) - 1000) / 1000 * 0.0005);
    }
  };
  const loud = (seconds) => { for (let i = 0; i < seconds * rate; i++) out.push(Math.floor(i / 20) % 2 === 0 ? 0.3 : -0.3); };
  quiet(0.5); loud(1); quiet(3); loud(1); quiet(12);
  return Float32Array.from(out);
}

test('SilenceSuppressor: the Swift rules, with the Swift answer on the same signal, however it is cut', () => {
  const samples = suppressionSignal();
  // Sent: 0.5 s quiet, 1 s loud, 1.3 s of the pause (hangover and pre-roll). Left out: 0.1 s
  // at once, then 1.1 s declared when speech resumes, whose last 0.5 s is sent again before
  // it. The 12 s pause: 0.1 s, 5 s, 5 s, and the rest at the end. (Positive: audio samples,
  // consecutive pieces added up; negative: silence.)
  const expected = [44800, -1600, -17600, 44800, -1600, -80000, -80000, -9600];
  for (const chunk of [333, 160, 4096]) {
    const suppressor = new client.SilenceSuppressor(16000);
    const counts = [];
    const take = (outputs) => {
      for (const o of outputs) {
        if (o.type === 'audio') {
          assert.ok(o.samples instanceof Float32Array);
          if (counts.at(-1) > 0) counts[counts.length - 1] += o.samples.length;
          else counts.push(o.samples.length);
        } else {
          counts.push(-Math.round(o.seconds * 16000));
        }
      }
    };
    for (let i = 0; i < samples.length; i += chunk) take(suppressor.push(samples.subarray(i, i + chunk)));
    assert.equal(suppressor.isSuppressing, true);
    take(suppressor.finish());
    assert.deepEqual(counts, expected, `chunks of ${chunk}`);
  }
  // The audio it gives is the input's own samples: the pre-roll before the second burst.
  const suppressor = new client.SilenceSuppressor(16000);
  const outputs = suppressor.push(samples);
  const second = outputs.filter((o) => o.type === 'audio')[1].samples;
  assert.deepEqual([...second.subarray(0, 10)], [...samples.subarray(64000, 64010)]);
});

test('SilenceGate: pieces with any audio are sent whole, runs of silent ones declared as one, soon after the pause begins', () => {
  const samples = suppressionSignal();
  const gate = new client.SilenceGate(16000);
  const log = [];
  let sent = 0;
  let declared = 0;
  let position = 0;
  const take = (releases, at) => {
    for (const r of releases) {
      assert.equal(r.start, position, 'in order, nothing left out of the timeline');
      position += r.length;
      if (r.silence) {
        declared += r.length;
        log.push([-r.length, at]);
      } else {
        assert.equal(r.send.index * 320, r.start);
        sent += r.length;
      }
    }
  };
  for (let i = 0, index = 0; i < samples.length; i += 320, index++) {
    const piece = samples.subarray(i, i + 320);
    take(gate.piece({ index }, i, piece.length), i);
    take(gate.judge(piece), i);
  }
  take(gate.finish(), samples.length);
  assert.equal(position, samples.length);
  assert.equal(sent + declared, samples.length);
  // The suppressor left out 1.2 + 10.6 s; whole 20 ms pieces of it are left out here.
  assert.ok(declared >= 11.7 * 16000 && declared % 320 === 0, `${declared}`);
  // The first pause is declared about 0.6 s after it stops being sent (2.8 s), not when speech resumes (4.5 s).
  assert.ok(log[0][1] < 3.5 * 16000, JSON.stringify(log));
  assert.ok(log.length >= 5, JSON.stringify(log));
});

test('StenoClient.silence: declared in its place among the audio, exact, counted in sentSeconds', async () => {
  const { c, ready, socket } = make();
  c.sendAudio(new Int16Array(1600));
  assert.equal(c.silence(2.48), 2.58);
  c.sendAudio(new Int16Array(160));
  socket.open();
  socket.emit({ type: 'ready', seq: 1, session: 's' });
  await ready;
  assert.deepEqual(socket.sent.slice(1).map((m) => (m instanceof Uint8Array ? m.length : m)),
    [3200, { type: 'silence', duration: 2.48 }, 320]);
  c.silence(1 / 48000 * 960 * 3); // not rounded to milliseconds
  assert.deepEqual(socket.texts.at(-1), { type: 'silence', duration: 0.06 });
  c.silence(3600.5);
  assert.deepEqual(socket.texts.slice(-2).map((m) => m.duration), [3600, 0.5]);
  assert.throws(() => c.silence(0), TypeError);
  c.end();
  assert.throws(() => c.silence(1), (e) => e.code === 'closed');
});

test('publisher: silence is held in its place while away (for nothing in bufferSeconds), merged, and sent again on resume', async () => {
  const { p, nextSocket } = makePublisher({ bufferSeconds: 0.25 });
  const dropped = [];
  p.on('dropped', (d) => dropped.push(d.reason));
  p.start();
  const a = await nextSocket(0);
  a.open();
  a.emit(resumable('one'));
  p.sendAudio(pcm(0.1, 1));
  p.silence(5);
  p.sendAudio(pcm(0.1, 2));
  assert.deepEqual(firstBytes(a), ['start', 1, 'silence', 2]);
  a.emit({ type: 'progress', seq: 2, received: 0.1, analyzed: 0.1 }); // the silence did not arrive
  a.drop(1006);
  assert.equal(Math.round(p.bufferedSeconds * 1000), 100, 'silence holds no audio');
  p.silence(2);
  p.silence(3); // one silence with the last
  p.sendAudio(pcm(0.1, 3));
  assert.equal(Math.round(p.bufferedSeconds * 1000), 200);
  assert.equal(Math.round(p.timeline * 1000), 10300);
  const b = await nextSocket(1);
  b.open();
  b.emit({ type: 'resumed', seq: 3, session: 'one', received: 0.1 });
  assert.deepEqual(firstBytes(b), ['resume', 'silence', 2, 'silence', 3]);
  assert.deepEqual(b.texts.filter((m) => m.type === 'silence').map((m) => m.duration), [5, 5]);
  assert.deepEqual(dropped, []);
  assert.equal(p.droppedSeconds, 0);
  // Only audio counts against bufferSeconds.
  b.drop(1006);
  for (let i = 0; i < 4; i++) { p.silence(1); p.sendAudio(pcm(0.1, 10 + i)); }
  assert.ok(p.bufferedSeconds <= 0.25 + 1e-9, `${p.bufferedSeconds}`);
  assert.ok(dropped.includes('buffer_full'));
  await p.close();
});

test('the page streams to v1/stream next to itself, so that it works under a sub-path', () => {
  assert.equal(defaultStreamUrl('http://127.0.0.1:8080/'), 'ws://127.0.0.1:8080/v1/stream');
  assert.equal(defaultStreamUrl('http://127.0.0.1:8080/index.html?token=t#x'), 'ws://127.0.0.1:8080/v1/stream');
  // Behind a proxy that passes https://host/captions/ on to Steno's root.
  assert.equal(defaultStreamUrl('https://host.example/captions/'), 'wss://host.example/captions/v1/stream');
  assert.equal(defaultStreamUrl('https://host.example/captions/index.html?channel=a'), 'wss://host.example/captions/v1/stream');
  assert.equal(defaultStreamUrl('https://host.example:8443/a/b/'), 'wss://host.example:8443/a/b/v1/stream');
  // Opened from disk: no server to guess.
  assert.equal(defaultStreamUrl('file:///home/me/steno/web-client/index.html'), '');
  // The viewer page derives its server the same way (viewer.js: new URL('./', location.href)).
  const viewerBase = new URL('./', 'https://host.example/captions/view.html?channel=hall').href;
  assert.equal(client.listenUrl(viewerBase, 'hall'), 'wss://host.example/captions/v1/listen?channel=hall');
  // And the page's stream address, given to the client, stays where it is.
  assert.equal(client.streamUrl(defaultStreamUrl('https://host.example/captions/'), { token: 't' }),
    'wss://host.example/captions/v1/stream?token=t');
});
