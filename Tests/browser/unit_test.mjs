// Unit tests of the web client's pure modules in Node, without a server or a browser:
// steno-client.js against a scripted WebSocket, and transcript.js.
//   node --test Tests/browser/unit_test.mjs
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { readFile } from 'node:fs/promises';
import { fileURLToPath } from 'node:url';
import path from 'node:path';

const here = path.dirname(fileURLToPath(import.meta.url));
async function load(name) {
  // The modules live in a folder without package.json: load them as ES modules explicitly.
  const source = await readFile(path.resolve(here, '../../web-client', name), 'utf8');
  return import(`data:text/javascript;base64,${Buffer.from(source).toString('base64')}`);
}
const client = await load('steno-client.js');
const transcript = await load('transcript.js');
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

test('transcript: timestamps, text, WebVTT and SRT', () => {
  const { timestamp, shortTime, toText, toWebVTT, toSRT, toCues } = transcript;
  assert.equal(timestamp(3661.5), '01:01:01.500');
  assert.equal(timestamp(0.0004, ','), '00:00:00,000');
  assert.equal(shortTime(62.345), '1:02.35');
  const finals = [
    { start: 0.5, end: 1.25, text: 'hello <world> & you' },
    { start: 2, end: 2, text: '   ' },
    { start: 3, end: 4, text: 'second line' },
  ];
  assert.equal(toText(finals), 'hello <world> & you\nsecond line\n');
  assert.equal(toWebVTT(finals),
    'WEBVTT\n\n1\n00:00:00.500 --> 00:00:01.250\nhello &lt;world&gt; &amp; you\n\n2\n00:00:03.000 --> 00:00:04.000\nsecond line\n\n');
  assert.equal(toSRT(finals),
    '1\n00:00:00,500 --> 00:00:01,250\nhello <world> & you\n\n2\n00:00:03,000 --> 00:00:04,000\nsecond line\n\n');
  assert.equal(toWebVTT([]), 'WEBVTT\n\n');

  // Long finals become cues of at most two lines of 42 characters, cut at word times.
  const words = Array.from({ length: 30 }, (_, i) => ({ word: `word${i}`, start: 10 + i * 0.5, end: 10.4 + i * 0.5 }));
  const long = { start: 10, end: 25, text: words.map((w) => w.word).join(' '), words };
  const cues = toCues([long]);
  assert.ok(cues.length > 1);
  for (const cue of cues) {
    assert.ok(cue.lines.length <= 2 && cue.lines.every((l) => l.length <= 42), JSON.stringify(cue));
  }
  assert.equal(cues[0].start, 10);
  assert.equal(cues.at(-1).end, 25);
  const firstOfSecond = Number(cues[1].lines[0].split(' ')[0].slice(4));
  assert.equal(cues[1].start, 10 + firstOfSecond * 0.5, 'a cue starts at its first word');
  assert.deepEqual(cues.flatMap((c) => c.lines.join(' ').split(' ')), words.map((w) => w.word));
  // Without word times the range is shared out; cues never overlap.
  const untimed = toCues([{ start: 0, end: 10, text: long.text }]);
  for (let i = 1; i < untimed.length; i++) assert.ok(untimed[i].start >= untimed[i - 1].end);
  assert.equal(untimed.at(-1).end, 10);
});
