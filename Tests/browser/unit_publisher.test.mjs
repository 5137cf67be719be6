// Unit tests of the web client in Node, without a server or a browser: StenoPublisher
// without resume: audio held until ready, reconnects, a full, restarting or unreachable
// server, a refused token or origin, the Opus → PCM fallback, pause, idle, end and cancel.
// One of Tests/browser/unit_*.test.mjs (shared parts in unit_helpers.mjs); all of them:
//   node --test Tests/browser/unit_*.test.mjs
import { test } from 'node:test';
import assert from 'node:assert/strict';
import * as client from '../../web-client/steno-client.js';
import { ScriptedSocket, wait, full, makePublisher, pcm } from './unit_helpers.mjs';
const { StenoError } = client;

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
