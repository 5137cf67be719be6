// Unit tests of the web client in Node, without a server or a browser: resume:
// a resuming StenoClient and gap(); a publisher that resumes after a drop, sends again what
// the server lacks, declares what it no longer has, or starts a new session.
// One of Tests/browser/unit_*.test.mjs (shared parts in unit_helpers.mjs); all of them:
//   node --test Tests/browser/unit_*.test.mjs
import { test } from 'node:test';
import assert from 'node:assert/strict';
import * as client from '../../web-client/steno-client.js';
import { make, makePublisher, pcm, resumable, firstBytes } from './unit_helpers.mjs';

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
