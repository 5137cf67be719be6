// Unit tests of the web client in Node, without a server or a browser: StenoViewer
// on a scripted WebSocket: events, backfill, reconnects and backoff, refusals; and the viewer
// page's languages (viewer/language.js): its addresses with a language, its picker.
// One of Tests/browser/unit_*.test.mjs (shared parts in unit_helpers.mjs); all of them:
//   node --test Tests/browser/unit_*.test.mjs
import { test } from 'node:test';
import assert from 'node:assert/strict';
import * as client from '../../web-client/steno-client.js';
import { channelsUrl, languageChoice, languageOptions } from '../../web-client/viewer/language.js';
import { ScriptedSocket, wait } from './unit_helpers.mjs';
const { StenoClient } = client;

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

test('viewer page: a language in its addresses (listen, caption files, the channel list), a sub-path kept', () => {
  const { listenUrl, captionsUrl } = client;
  // As the page builds them: the page's own folder (a reverse proxy's sub-path) or ?server=.
  for (const [server, prefix] of [['http://example.test/captions/', 'example.test/captions'],
    ['https://example.test/', 'example.test'], ['wss://example.test/steno/v1/stream', 'example.test/steno']]) {
    const secure = server.startsWith('https') || server.startsWith('wss') ? 's' : '';
    assert.equal(listenUrl(server, 'studio-a', { token: 'tok', language: 'it' }),
      `ws${secure}://${prefix}/v1/listen?channel=studio-a&token=tok&language=it`);
    assert.equal(captionsUrl(server, 'studio-a', 'vtt', { language: 'original' }),
      `http${secure}://${prefix}/v1/channels/studio-a/captions.vtt?language=original`);
    assert.equal(captionsUrl(server, 'studio-a', 'srt', { token: 'tok', language: 'en-GB' }),
      `http${secure}://${prefix}/v1/channels/studio-a/captions.srt?token=tok&language=en-GB`);
    assert.equal(channelsUrl(server, 'studio-a'), `http${secure}://${prefix}/v1/channels`);
    assert.equal(channelsUrl(server, 'studio-a', { token: 't k' }), `http${secure}://${prefix}/v1/channels?token=t+k`);
  }
  // No language: the addresses as they were (the publisher's own captions).
  assert.equal(listenUrl('http://example.test/', 'studio-a', { language: '' }), 'ws://example.test/v1/listen?channel=studio-a');
  assert.equal(captionsUrl('http://example.test/', 'a', 'txt', { language: undefined }), 'http://example.test/v1/channels/a/captions.txt');
  // StenoViewer asks for it on every connection.
  const viewer = new client.StenoViewer('https://example.test/', 'studio-a', { token: 'tok', language: 'it', WebSocket: ScriptedSocket });
  assert.equal(viewer.url, 'wss://example.test/v1/listen?channel=studio-a&token=tok&language=it');
});

test('viewer page: a language from the page address only when the server would take it', () => {
  for (const good of ['en', 'it', 'en-GB', 'pt_BR', 'zh-Hant-TW', 'original', 'Original', ' it ']) assert.equal(languageChoice(good), good.trim());
  for (const bad of ['', null, undefined, 'e', 'english!', 'en--GB', 'it-', '-it', 'en-GB-toolongsubtag',
    'x'.repeat(9), `en-${'a1234567-'.repeat(4)}b`, 'it&token=x']) {
    assert.equal(languageChoice(bad), '', String(bad));
  }
});

test('viewer page: the language picker from a /v1/channels entry', () => {
  const labels = ({ options }) => options.map((o) => `${o.value}:${o.label}`);
  const translated = { name: 'studio-a', state: 'live', languages: ['en', 'it'] };
  assert.deepEqual(labels(languageOptions(translated)), ['en:en', 'it:it']);
  // Selected: what the server sends for the language asked (no language: the first, its own).
  assert.equal(languageOptions(translated).selected, 0);
  assert.equal(languageOptions(translated, 'it').selected, 1);
  assert.equal(languageOptions(translated, 'IT-it').selected, 1, 'the primary subtag, whatever its case');
  assert.equal(languageOptions(translated, 'en-GB').selected, 0);
  assert.equal(languageOptions(translated, 'original').selected, 1, 'the original, whatever its language');
  assert.equal(languageOptions(translated, 'fr').selected, 0, 'not carried: the server sends its own');
  // An original whose language is found per utterance (or the captions' own) is "Original".
  const found = { name: 'studio-a', languages: ['en', 'original'] };
  assert.deepEqual(labels(languageOptions(found)), ['en:en', 'original:Original']);
  assert.equal(languageOptions(found, 'original').selected, 1);
  assert.equal(languageOptions(found, 'it').selected, 0, '"it" is not "original" to the server');
  // One language or none: nothing to choose (the page hides the picker below two).
  assert.deepEqual(languageOptions({ languages: ['en'] }, 'en'), { options: [{ value: 'en', label: 'en' }], selected: 0 });
  assert.deepEqual(languageOptions({ languages: ['en'] }, 'original').selected, 0);
  for (const entry of [{ languages: [] }, { name: 'x' }, undefined, null, { languages: 'en' }]) {
    assert.deepEqual(languageOptions(entry, 'it'), { options: [], selected: -1 });
  }
  // What the server would not take is left out.
  assert.deepEqual(labels(languageOptions({ languages: ['en', 7, '', 'not a tag', 'it'] })), ['en:en', 'it:it']);
});
