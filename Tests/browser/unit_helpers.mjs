// What the web client's Node unit tests (Tests/browser/unit_*.test.mjs) share: a WebSocket
// whose server side the test plays, a scripted `fetch`, a client and a publisher on them, and
// small utilities. Not a test file itself.
import assert from 'node:assert/strict';
import * as client from '../../web-client/steno-client.js';
const { StenoClient, StenoPublisher } = client;

/** A WebSocket whose server side the test plays. */
export class ScriptedSocket {
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

export function make(options = {}) {
  const c = new StenoClient('http://example.test:8080', { WebSocket: ScriptedSocket, token: 't k', ...options });
  const ready = c.start();
  const socket = ScriptedSocket.instances.at(-1);
  return { c, ready, socket };
}

export const wait = (ms) => new Promise((resolve) => setTimeout(resolve, ms));

/** A scripted `fetch`: answers from `answers` in turn (the last one repeats); records URLs. */
export function scriptedFetch(answers) {
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

export const full = (retryAfter) => ({ status: 503, body: { status: 'full', retryAfter }, headers: { 'retry-after': '5' } });

/** A publisher on scripted sockets with a fast backoff, and what it reported. */
export function makePublisher(options = {}, answers = [{ status: 426 }]) {
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

export const pcm = (seconds, value = 1) => new Int16Array(Math.round(seconds * 16000)).fill(value);

/** `ready` of a server that keeps sessions for resume. */
export const resumable = (session = 's', resumeSeconds = 30) => ({
  type: 'ready', seq: 1, session, resumeToken: `token-${session}`, limits: { resumeSeconds },
});
export const firstBytes = (socket) => socket.sent.map((m) => (m instanceof Uint8Array ? m[0] : m.type));
