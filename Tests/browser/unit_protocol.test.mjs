// Unit tests of the web client in Node, without a server or a browser: the pure
// helpers: addresses, close codes and their words, Opus durations, the server's models, what
// the stream address says to a plain GET, and page.js's address and sentence.
// One of Tests/browser/unit_*.test.mjs (shared parts in unit_helpers.mjs); all of them:
//   node --test Tests/browser/unit_*.test.mjs
import { test } from 'node:test';
import assert from 'node:assert/strict';
import * as client from '../../web-client/steno-client.js';
import { defaultStreamUrl, reconnectedMessage } from '../../web-client/page.js';
import { scriptedFetch, full } from './unit_helpers.mjs';

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

test('page: what it says after a resume, with the seconds lost', () => {
  assert.equal(reconnectedMessage(0), 'Reconnected; nothing was lost.');
  assert.equal(reconnectedMessage(0.0004), 'Reconnected; nothing was lost.', 'below what a person could miss');
  assert.equal(reconnectedMessage(3.24), 'Reconnected; 3.2 s of audio could not be sent again and were lost.');
  assert.equal(reconnectedMessage(1), 'Reconnected; 1.0 s of audio could not be sent again and was lost.');
  assert.equal(reconnectedMessage(42.6), 'Reconnected; 43 s of audio could not be sent again and were lost.');
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
