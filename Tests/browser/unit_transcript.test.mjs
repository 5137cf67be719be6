// Unit tests of the web client in Node, without a server or a browser: transcript.js:
// text, WebVTT and SRT as the server writes them, cues and their lines and times.
// One of Tests/browser/unit_*.test.mjs (shared parts in unit_helpers.mjs); all of them:
//   node --test Tests/browser/unit_*.test.mjs
import { test } from 'node:test';
import assert from 'node:assert/strict';
import * as transcript from '../../web-client/transcript.js';

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
