// Unit tests of the web client in Node, without a server or a browser: StenoClient
// against a scripted WebSocket: the start message, audio framing, promises, events, errors.
// One of Tests/browser/unit_*.test.mjs (shared parts in unit_helpers.mjs); all of them:
//   node --test Tests/browser/unit_*.test.mjs
import { test } from 'node:test';
import assert from 'node:assert/strict';
import * as client from '../../web-client/steno-client.js';
import { ScriptedSocket, make, makePublisher } from './unit_helpers.mjs';
const { StenoError } = client;

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
