// Unit tests of the web client in Node, without a server or a browser: silence
// suppression: SilenceSuppressor and SilenceGate against the Swift answer, silence() on the
// client and on the publisher.
// One of Tests/browser/unit_*.test.mjs (shared parts in unit_helpers.mjs); all of them:
//   node --test Tests/browser/unit_*.test.mjs
import { test } from 'node:test';
import assert from 'node:assert/strict';
import * as client from '../../web-client/steno-client.js';
import { make, makePublisher, pcm, resumable, firstBytes } from './unit_helpers.mjs';

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
