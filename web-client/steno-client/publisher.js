// Part of steno-client.js, the module to import (its header documents StenoPublisher's options,
// events and properties): StenoPublisher, a publisher that outlives its connections.

import { StenoError, describeError, shouldReconnect } from './protocol.js';
import { probeStream, streamUrl } from './addresses.js';
import { BYTES_PER_SAMPLE, floatToPcm, opusPacketSamples, toBytes } from './audio-data.js';
import { EventOwner, deferred } from './events.js';
import { StenoClient } from './client.js';

/**
 * Slack when comparing a time the server wrote (to the millisecond) with one of the client's
 * own: the server's count of what it received always falls between two audio messages.
 */
const TIME_SLACK = 0.0006;

/**
 * A publisher that stays with its audio: it opens a session (StenoClient), resumes that session
 * on a new connection when the connection drops (sending again what the server did not get),
 * reconnects with backoff when the server is full or restarting, holds the audio given
 * meanwhile (bounded) and sends it when a session is ready again, and switches from Opus to
 * PCM when the server refuses Opus (with `pcmFallback`). Its events are the sessions' server
 * events, each with `offset` added, and its own 'state', 'format', 'dropped' and 'close'.
 */
export class StenoPublisher extends EventOwner {
  constructor(url, options = {}) {
    super();
    this.url = streamUrl(url, { token: options.token });
    this.options = {
      reconnect: true, minDelay: 0.5, maxDelay: 30, restartDelay: 5, jitter: 0.2,
      firstAttempts: 3, maxAttempts: Infinity, bufferSeconds: 60, pcmFallback: false, probe: true,
      resume: true, volatile: true, words: true, maxFrameBytes: 32768,
      ...options,
    };
    this.audio = { encoding: 'pcm_s16le', sampleRate: 16000, channels: 1, ...(options.audio || {}) };
    this.state = 'new';
    this.client = null; // the StenoClient of the current connection
    this.session = null; // the id of the latest session that was ready
    this.sessions = 0; // sessions that were ready (a resumed one counts once)
    this.resumes = 0; // times a session was resumed on a new connection
    this.timeline = 0; // seconds of audio given to sendAudio (the publisher's timeline)
    this.offset = null; // where the current session's audio starts on that timeline
    this.droppedSeconds = 0; // audio given but never captioned: buffer full, format changed, end while away, lost
    this.attempt = 0; // connection attempts since the last ready session
    this.reason = null; // why reconnecting: 'full', 'restarting', 'lost', 'unreachable', 'session_limit'
    this.reconnectDelay = null;
    this.retryAt = null; // Date.now() milliseconds of the next attempt
    this.error = null;
    this.lag = null;
    this.lastSeq = 0; // seq of the current session's last event (what a resume asks to continue after)

    // Audio is kept as the messages it is sent in: {data, bytes, seconds, t0, sent?} (t0 on the
    // publisher's timeline; `sent` once a connection took it), and finalizes in their place
    // among them: {finalize, through, at, waiter}.
    this._held = []; // to send once a session is ready (or resumed)
    this._heldSeconds = 0;
    this._sent = []; // sent on the current connection and not yet acknowledged by `progress.received`
    this._sentSeconds = 0;
    this._sentThrough = 0; // the end of the audio the current session's connections took
    this._pendingFinalizes = []; // finalizes the session has (or may have), awaiting `finalized`
    this._captionedThrough = 0; // the end of the current session's latest final
    this._resume = null; // {session, resumeToken, seconds} while the current session can be resumed
    this._continuation = null; // {session, resumeToken} of the last session, for the next one's `continues`
    this._lostAt = null; // Date.now() when its connection dropped
    this._resumeRefused = false; // the last resume was refused: the next `ready` says so
    this._carry = null; // PCM bytes short of a whole sample frame, for the next piece
    this._lastOpusSamples = 960;
    this._live = true; // audio is coming; pause() says it is not for a while
    this._ending = null; // 'end' | 'cancel' once asked
    this._restarting = false; // the server said it is going away: wait for it, however long
    this._failures = 0; // attempts in a row that found no server (the ones firstAttempts/maxAttempts bound)
    this._fellBack = false;
    this._timer = null;
    this._ready = deferred();
    this._closed = deferred();
    this._endResult = null; // deferred of end() or cancel()
    this.ready = this._ready.promise;
    this.closed = this._closed.promise;
  }

  /** Seconds of audio held until a session is ready (after a drop: with what may need sending again). */
  get bufferedSeconds() {
    return this._heldSeconds;
  }

  /** Bytes not yet sent: the socket's queue, and the audio held. */
  get bufferedAmount() {
    const held = this._held.reduce((n, item) => n + (item.bytes || 0), 0);
    return (this.client && this.client.state !== 'closed' ? this.client.bufferedAmount : 0) + held;
  }

  /** Connects (once); resolves with the first `ready`, rejects if the publisher ends before one. */
  start() {
    if (this.state === 'new') this._connect();
    return this.ready;
  }

  /**
   * One piece of audio in the current format (see StenoClient.sendAudio). Sent at once while a
   * session is open, else held (the latest `bufferSeconds`) until one is. Returns the publisher's
   * timeline in seconds.
   */
  sendAudio(data) {
    if (this._ending || this.state === 'closed') {
      throw new StenoError('closed', 'Audio cannot be sent after end(), cancel() or close().');
    }
    const pieces = this._pieces(data);
    this._live = true;
    for (const piece of pieces) {
      piece.t0 = this.timeline;
      this.timeline += piece.seconds;
      if (this.state === 'open') {
        this._sendAudioOn(this.client, piece);
      } else {
        this._held.push(piece);
        this._heldSeconds += piece.seconds;
      }
    }
    if (this.state !== 'open') {
      this._trimHeld();
      if (this.state === 'new' || this.state === 'idle') this._connect();
    }
    return this.timeline;
  }

  /**
   * `seconds` of silence left out (see SilenceSuppressor), declared with `silence` in its place
   * among the audio: the publisher's timeline advances by it. Held like audio while there is no
   * session, but it counts for nothing in `bufferSeconds` (it holds no audio), and consecutive
   * held silences are one. Returns the publisher's timeline in seconds.
   */
  silence(seconds) {
    if (this._ending || this.state === 'closed') {
      throw new StenoError('closed', 'Silence cannot be declared after end(), cancel() or close().');
    }
    if (!(seconds > 0)) return this.timeline;
    this._live = true; // a microphone that is on but quiet
    const piece = { silence: true, data: null, bytes: 0, seconds, t0: this.timeline };
    this.timeline += seconds;
    if (this.state === 'open') {
      this._sendAudioOn(this.client, piece);
      return this.timeline;
    }
    const last = this._held.at(-1);
    if (last?.silence && !last.sent && Math.abs(last.t0 + last.seconds - piece.t0) < TIME_SLACK) last.seconds += seconds;
    else this._held.push(piece);
    this._trimHeld();
    if (this.state === 'new' || this.state === 'idle') this._connect();
    return this.timeline;
  }

  /**
   * Makes what was said so far final. `through` (optional) is on the publisher's timeline.
   * Resolves with the `finalized` event (its `through` on the session's timeline, plus
   * `offset`), or null when there is no session and no audio to finalize.
   */
  finalize(through) {
    if (this.state === 'closed') return Promise.reject(this.error || new StenoError('closed', 'The publisher is closed.'));
    if (this._ending) return Promise.reject(new StenoError('closed', 'Cannot finalize after end() or cancel().'));
    const item = { finalize: true, through, at: this.timeline, waiter: deferred() };
    if (this.state === 'open') {
      this._sendFinalize(this.client, item);
      return item.waiter.promise;
    }
    const something = this._heldSeconds > 0 || this.state === 'connecting' || (this.state === 'reconnecting' && this._resume);
    if (this.state === 'idle' || !something) return Promise.resolve(null);
    this._held.push(item);
    return item.waiter.promise;
  }

  /**
   * No audio for a while (the microphone is off): after a drop, do not reconnect until audio
   * comes again, unless audio is held. A session that is open stays open.
   */
  pause() {
    this._live = false;
    if (this.state === 'reconnecting' && this._heldSeconds === 0) this._setIdle();
  }

  /**
   * Finishes: the held audio is sent and the session ended if one is open or being opened;
   * if the publisher is waiting to reconnect, the held audio is given up. Resolves with the
   * `ended` event, or null when no session was open; no reconnects after it.
   */
  end() {
    return this._finishWith('end');
  }

  /** Cancels: held audio is discarded. Resolves with the `cancelled` event, or null. */
  cancel() {
    return this._finishWith('cancel');
  }

  /** Stops at once, without `end`: no reconnects; `closed` resolves. */
  close(code = 1000, reason = '') {
    if (this.state === 'closed') return this.closed;
    const client = this.client;
    this.client = null;
    if (client && client.state !== 'closed') client.close(code, reason);
    this._finish({ code, reason, wasClean: true }, null);
    return this.closed;
  }

  /** While waiting to reconnect, connect at once. */
  reconnectNow() {
    if (this.state !== 'reconnecting' && this.state !== 'idle') return false;
    this._connect();
    return true;
  }

  // ---- internals -------------------------------------------------------------------------

  _setState(state, details = {}) {
    const previous = this.state;
    if (state === previous && state !== 'reconnecting') return;
    this.state = state;
    this._emit('state', { state, previous, attempt: this.attempt, reason: this.reason, ...details });
  }

  /**
   * What the next connection is — the one place that decides how a connection begins: the
   * `resume` of the session whose connection dropped while the server still keeps it
   * (`limits.resumeSeconds` since the drop), else `start` of a new session from these options.
   */
  _sessionOptions() {
    const { language, model, volatile, words, channel, phrases, profanity, start, WebSocket, maxFrameBytes } = this.options;
    const options = { audio: this.audio, language, model, volatile, words, channel, phrases, profanity, start, WebSocket, maxFrameBytes };
    if (this._resume && this._lostAt !== null && Date.now() - this._lostAt > this._resume.seconds * 1000) {
      this._endSession(); // too late: the server has finalized it by now
    }
    if (this._resume) {
      const { session, resumeToken } = this._resume;
      options.resume = { session, resumeToken, after: this.lastSeq };
    } else if (this._continuation) {
      // A new session after a lost one: it takes the lost one's channel over at once.
      options.continues = this._continuation;
    }
    return options;
  }

  _connect() {
    clearTimeout(this._timer);
    this._timer = null;
    this.reconnectDelay = null;
    this.retryAt = null;
    const client = new StenoClient(this.url, this._sessionOptions());
    this.client = client;
    client.on('event', (event) => { if (this.client === client) this._onEvent(client, event); });
    client.on('close', (info) => { if (this.client === client) this._onClientClose(client, info); });
    this._setState('connecting', { resuming: !!client.options.resume });
    client.start().catch(() => {}); // the outcome arrives as 'close'
  }

  _onEvent(client, event) {
    const resuming = !!client.options.resume;
    // A refused resume is not the user's error: a new session follows (see _onClientClose).
    if (resuming && event.type === 'error' && event.code === 'resume_failed') return;
    if (typeof event.seq === 'number') {
      // A resumed connection replays the events after `after` with their own seq: one this
      // publisher already has is not delivered again.
      if (resuming && event.seq <= this.lastSeq) return;
      this.lastSeq = event.seq;
    }
    if (event.type === 'ready' && !resuming) {
      this._onReady(client, event);
      return;
    }
    if (event.type === 'resumed' && resuming) {
      this._onResumed(client, event);
      return;
    }
    const delivered = { ...event, offset: this.offset };
    let answered = null;
    switch (event.type) {
      case 'progress':
        if (typeof event.received === 'number' && typeof event.analyzed === 'number') {
          this.lag = Math.max(0, event.received - event.analyzed);
        }
        this._acknowledge(event.received);
        break;
      case 'final':
        if (typeof event.end === 'number') this._captionedThrough = Math.max(this._captionedThrough, this.offset + event.end);
        break;
      case 'finalized': {
        // Answers come in the order the finalizes were sent, whichever connection brings them.
        answered = this._pendingFinalizes.shift() ?? null;
        const index = answered ? this._sent.indexOf(answered) : -1;
        if (index >= 0) this._sent.splice(index, 1);
        break;
      }
      case 'ended':
      case 'cancelled':
        this._endResult?.resolve(delivered);
        break;
      default:
        break;
    }
    this._deliver(delivered);
    answered?.waiter.resolve(delivered);
  }

  /** Resets what counts the attempts to connect, once a session is ready or resumed. */
  _connected() {
    this.attempt = 0;
    this._failures = 0;
    this._restarting = false;
    this.reason = null;
    this.error = null;
    this._lostAt = null;
  }

  _onReady(client, event) {
    this.session = event.session ?? null;
    this.sessions += 1;
    this._connected();
    const resumeSeconds = Number(event.limits?.resumeSeconds) || 0;
    this._resume = this.options.resume && event.resumeToken && resumeSeconds > 0
      ? { session: this.session, resumeToken: event.resumeToken, seconds: resumeSeconds } : null;
    // Kept when the session can no longer be resumed: the next one `continues` it.
    this._continuation = event.resumeToken ? { session: this.session, resumeToken: event.resumeToken } : null;
    const held = this._held;
    this._held = [];
    this._heldSeconds = 0;
    this._sent = [];
    this._sentSeconds = 0;
    this.offset = held.find((item) => !item.finalize)?.t0 ?? this.timeline;
    this._sentThrough = this.offset;
    this._captionedThrough = this.offset;
    const resumeFailed = this._resumeRefused;
    this._resumeRefused = false;
    this._setState(this._ending ? 'ending' : 'open');
    const delivered = { ...event, offset: this.offset, ...(resumeFailed ? { resumeFailed: true } : {}) };
    this._ready.resolve(delivered);
    this._deliver(delivered);
    // Everything held, in order: audio, and the finalizes asked for while away.
    for (const item of held) {
      if (item.finalize) this._sendFinalize(client, item);
      else this._sendAudioOn(client, item);
    }
    if (this._ending === 'end') client.end().catch(() => {});
  }

  /**
   * The session continues on this connection. The server has its audio up to `received`: send
   * what it lacks from there on — what the old connection may not have delivered, then what
   * was held meanwhile. Audio no longer kept is declared as a `gap` first, so the session's
   * timeline stays the publisher's timeline less `offset`.
   */
  _onResumed(client, event) {
    this.resumes += 1;
    this._connected();
    const offset = this.offset ?? 0;
    const at = offset + (typeof event.received === 'number' ? event.received : 0);
    const send = [];
    let resent = 0;
    for (const item of this._held) {
      if (item.finalize) {
        // One placed before `at` reached the server (audio after it did); one at `at` may not
        // have, and is sent again (a second `finalized` for it is harmless).
        if (item.at >= at - TIME_SLACK) send.push(item);
      } else if (item.t0 + item.seconds / 2 > at) {
        // The server's count falls between two messages: this one is after it.
        send.push(item);
        if (item.sent) resent += audioSeconds(item);
      }
    }
    this._pendingFinalizes = this._pendingFinalizes.filter((item) => !send.includes(item));
    const firstAudio = send.find((item) => !item.finalize);
    const lacking = (firstAudio ? firstAudio.t0 : this.timeline) - at;
    const lost = lacking > TIME_SLACK ? lacking : 0;
    // Of what is lost, what was sent and never arrived has not been counted yet (held audio
    // that was given up has been, as 'buffer_full').
    const uncounted = Math.min(firstAudio ? firstAudio.t0 : this.timeline, this._sentThrough) - at;
    if (uncounted > TIME_SLACK) this._dropped(uncounted, 'connection_lost');
    this._held = [];
    this._heldSeconds = 0;
    this._setState(this._ending ? 'ending' : 'open', { resumed: true });
    this._deliver({ ...event, offset, lost, resent });
    if (lost > 0) client.gap(lost).catch(() => {});
    for (const item of send) {
      if (item.finalize) this._sendFinalize(client, item);
      else this._sendAudioOn(client, item);
    }
    if (this._ending === 'end') client.end().catch(() => {});
  }

  /**
   * One piece of audio in the current format as the messages it will be sent in, each
   * {data, bytes, seconds}: an Opus packet as it is; PCM in whole sample frames of at most
   * maxFrameBytes (a partial frame waits for the next piece). Each one is a copy.
   */
  _pieces(data) {
    const { encoding, sampleRate, channels = 1 } = this.audio;
    if (encoding === 'opus') {
      if (data instanceof Float32Array) throw new TypeError('sendAudio: Opus takes encoded packets, not samples');
      const packet = toBytes(data, 'opus').slice();
      const samples = opusPacketSamples(packet) || this._lastOpusSamples;
      this._lastOpusSamples = samples;
      return [{ data: packet, bytes: packet.byteLength, seconds: samples / 48000 }];
    }
    let bytes = data instanceof Float32Array ? floatToPcm(data, encoding) : toBytes(data, encoding);
    if (this._carry) {
      const joined = new Uint8Array(this._carry.length + bytes.length);
      joined.set(this._carry);
      joined.set(bytes, this._carry.length);
      bytes = joined;
    }
    const frameBytes = (BYTES_PER_SAMPLE[encoding] || 2) * channels;
    const whole = bytes.length - (bytes.length % frameBytes);
    this._carry = whole < bytes.length ? bytes.slice(whole) : null;
    const maxBytes = Math.max(frameBytes, this.options.maxFrameBytes - (this.options.maxFrameBytes % frameBytes));
    const pieces = [];
    for (let offset = 0; offset < whole; offset += maxBytes) {
      const piece = bytes.slice(offset, Math.min(whole, offset + maxBytes));
      pieces.push({ data: piece, bytes: piece.byteLength, seconds: piece.byteLength / frameBytes / sampleRate });
    }
    return pieces;
  }

  /** Sends one message of audio and keeps it until the server says it has it. */
  _sendAudioOn(client, item) {
    if (item.silence) client.silence(item.seconds);
    else client.sendAudio(item.data);
    item.sent = true;
    this._sent.push(item);
    this._sentSeconds += audioSeconds(item);
    this._sentThrough = item.t0 + item.seconds;
    this._trimSent();
  }

  _sendFinalize(client, item) {
    const offset = this.offset ?? 0;
    const through = item.through == null ? undefined : Math.max(0, item.through - offset);
    client.finalize(through).catch(() => {}); // answered by `finalized`, on this connection or a resumed one
    this._pendingFinalizes.push(item);
    this._sent.push(item);
  }

  /** The server has the session's audio up to `received`: what was sent before it is not kept. */
  _acknowledge(received) {
    if (typeof received !== 'number') return;
    const at = (this.offset ?? 0) + received;
    while (this._sent.length) {
      const item = this._sent[0];
      const arrived = item.finalize ? item.at < at - TIME_SLACK : item.t0 + item.seconds / 2 <= at;
      if (!arrived) break;
      this._sent.shift();
      if (!item.finalize) this._sentSeconds -= audioSeconds(item);
    }
  }

  /** Keeps at most `bufferSeconds` of sent audio to send again; older is given up. */
  _trimSent() {
    while (this._sentSeconds > this.options.bufferSeconds && this._sent.length > 1) {
      const item = this._sent.shift();
      if (!item.finalize) this._sentSeconds -= audioSeconds(item);
    }
  }

  /** The connection dropped: what it may not have delivered goes before what is held. */
  _keepUnacknowledged() {
    if (this._sent.length === 0) return;
    for (const item of this._sent) if (!item.finalize) this._heldSeconds += audioSeconds(item);
    this._held = [...this._sent, ...this._held];
    this._sent = [];
    this._sentSeconds = 0;
    this._trimHeld();
  }

  /**
   * The session is over on the server (it closed it, or it cannot be resumed): the next
   * connection starts a new one, with what no final of the old one covered.
   */
  _endSession() {
    this._resume = null;
    this._lostAt = null;
    const unanswered = this._pendingFinalizes.filter((item) => !this._held.includes(item));
    this._pendingFinalizes = [];
    const error = new StenoError('connection_lost', 'The session ended before it could finalize this.');
    for (const item of unanswered) item.waiter.reject(error);
    const through = this._captionedThrough;
    this._held = this._held.filter((item) => {
      if (item.finalize || !item.sent || item.t0 + item.seconds > through + TIME_SLACK) return true;
      this._heldSeconds -= audioSeconds(item);
      return false;
    });
  }

  /** Keeps the latest `bufferSeconds` of held audio. */
  _trimHeld() {
    let dropped = 0;
    while (this._heldSeconds > this.options.bufferSeconds) {
      const index = this._held.findIndex((item) => !item.finalize);
      if (index < 0 || this._held.length - index <= 1) break;
      const [item] = this._held.splice(index, 1);
      this._heldSeconds -= audioSeconds(item);
      if (!item.sent) dropped += audioSeconds(item); // sent audio may have arrived: a resume tells
    }
    if (dropped > 0) this._dropped(dropped, 'buffer_full');
  }

  _dropped(seconds, why) {
    this.droppedSeconds += seconds;
    this._emit('dropped', { seconds, total: this.droppedSeconds, reason: why });
  }

  _discardHeld(why) {
    const seconds = this._held.reduce((n, item) => n + (item.finalize || item.sent ? 0 : audioSeconds(item)), 0);
    const error = new StenoError('closed', 'The publisher stopped before a session could finalize this.');
    for (const item of this._held) if (item.finalize) item.waiter.reject(error);
    this._held = [];
    this._heldSeconds = 0;
    if (seconds > 0) this._dropped(seconds, why);
  }

  _finishWith(kind) {
    if (this._endResult) return this._endResult.promise;
    if (this.state === 'closed') return Promise.reject(this.error || new StenoError('closed', 'The publisher is closed.'));
    this._endResult = deferred();
    this._ending = kind;
    this._live = false;
    const client = this.client;
    if (kind === 'cancel') this._discardHeld('cancelled');
    if (client && (this.state === 'open' || this.state === 'connecting')) {
      const open = this.state === 'open';
      this._setState('ending');
      if (open) (kind === 'end' ? client.end() : client.cancel()).catch(() => {});
      else if (kind === 'cancel') client.cancel().catch(() => {});
      // end while connecting: the held audio and `end` follow `ready` (or `resumed`)
    } else {
      // Waiting to reconnect, idle, or never started: there is no session to finish.
      if (kind === 'end') this._discardHeld('ended_while_away');
      this._finish({ code: null, reason: '', wasClean: true }, null);
    }
    return this._endResult.promise;
  }

  _onClientClose(client, info) {
    this.client = null;
    this.lag = null;
    const { code, error } = info;
    const wasReady = client.readyMessage !== null;
    if (this._ending) {
      // No reconnect after end() or cancel(): an end whose connection failed gives up what it held.
      if (!wasReady) this._discardHeld('ended_while_away');
      this._finish(info, wasReady ? error : null);
      return;
    }
    if (!this.options.reconnect) {
      this._finish(info, error);
      return;
    }
    if (wasReady) this._keepUnacknowledged();
    // Only the connection went (no close from the server): the session waits to be resumed.
    const connectionOnly = code === 1005 || code === 1006;
    if (wasReady && connectionOnly && this._resume) {
      this._lostAt = Date.now();
    } else if (!(connectionOnly && client.options.resume) && error?.code !== 'connection_failed') {
      this._endSession(); // closed by the server, refused, or not resumable
    }
    // The server does not take Opus: carry on in PCM at the same rate, once.
    if (code === 1003 && this.audio.encoding === 'opus' && this.options.pcmFallback && !this._fellBack) {
      this._fellBack = true;
      const previous = this.audio;
      this.audio = { ...previous, encoding: 'pcm_s16le' };
      this._carry = null;
      this._discardHeld('format_changed');
      this._emit('format', { audio: this.audio, previous, reason: 'unsupported_audio' });
      this._connect();
      return;
    }
    if (code === 4404) {
      // The session could not be resumed (expired, or the server restarted): a new one at once.
      this._resumeRefused = true;
      if (!this._live && this._heldSeconds === 0) this._setIdle();
      else this._connect();
      return;
    }
    if (error?.code === 'connection_failed') {
      this._afterRefusal(info, Boolean(client.options.resume));
      return;
    }
    if (code === 4010 && !this._live) {
      this._setIdle(); // closed after a pause: a new session when audio comes again
      return;
    }
    if (!shouldReconnect(code)) {
      this._finish(info, error);
      return;
    }
    if (!this._live && this._heldSeconds === 0) {
      this._setIdle();
      return;
    }
    if (code === 1001 || code === 1012) {
      this._restarting = true;
      this._retry('restarting', this._backoff(this.options.restartDelay), info);
    } else if (code === 4009) {
      this._retry('session_limit', 0, info);
    } else if (code === 4008 && this.attempt === 0) {
      this._retry('lost', 0, info);
    } else {
      this._retry('lost', this._backoff(), info, { bounded: true });
    }
  }

  /** The connection never opened: ask the server why (a plain GET of the same address). */
  async _afterRefusal(info, resuming = false) {
    const answer = this.options.probe ? await probeStream(this.url, { fetch: this.options.fetch }) : { reason: 'unknown' };
    if (this.state !== 'connecting' || this.client !== null || this._ending) {
      if (this._ending && this.state !== 'closed') this._finish(info, null);
      return; // closed, ended or reconnected while asking
    }
    const details = { ...info, status: answer.status, retryAfter: answer.retryAfter };
    const refused = answer.reason === 'unauthorized' || answer.reason === 'forbidden';
    if (resuming && !refused && answer.reason !== 'unreachable' && answer.reason !== 'unknown') {
      // The server answers, but the resume's handshake failed: the instance that ran the
      // session is gone (a balancer still sends the resume there, and answers 503) or drains.
      // It will not be resumed: the next session, now, with the audio after the last final.
      this._endSession();
      this._resumeRefused = true;
      this._connect();
      return;
    }
    if (!refused && !this._live && this._heldSeconds === 0) {
      this._setIdle(); // nothing to send: try again when audio comes
      return;
    }
    switch (answer.reason) {
      case 'unauthorized':
        this._finish(info, new StenoError('unauthorized', describeError('unauthorized'), { status: 401 }));
        return;
      case 'forbidden':
        this._finish(info, new StenoError('forbidden', describeError('forbidden'), { status: 403 }));
        return;
      case 'full':
        this._failures = 0; // the server is there, only busy: wait as long as it takes
        this._retry('full', this._jittered(answer.retryAfter ?? 5, true), details);
        return;
      case 'draining':
        this._failures = 0;
        this._restarting = true;
        this._retry('restarting', this._jittered(answer.retryAfter ?? this.options.restartDelay, true), details);
        return;
      default:
        if (this._restarting) {
          // Gone while restarting: try again until it is back.
          this._retry('restarting', this._backoff(this.options.restartDelay), details);
        } else {
          this._retry(answer.reason === 'unreachable' ? 'unreachable' : 'lost', this._backoff(), details, { bounded: true });
        }
    }
  }

  _jittered(seconds, onlyLater = false) {
    const { jitter } = this.options;
    const factor = onlyLater ? 1 + Math.random() * jitter : 1 - jitter + Math.random() * 2 * jitter;
    return seconds * factor;
  }

  _backoff(cap = this.options.maxDelay) {
    const { minDelay, maxDelay } = this.options;
    return this._jittered(Math.min(cap, maxDelay, minDelay * 2 ** this.attempt));
  }

  /** Waits `delay` seconds, then connects again; a bounded retry gives up after its attempts. */
  _retry(reason, delay, info, { bounded = false } = {}) {
    if (bounded) {
      const limit = this.sessions > 0 ? this.options.maxAttempts : this.options.firstAttempts;
      if (this._failures >= limit) {
        const error = info.error?.code === 'connection_failed' || !info.error
          ? new StenoError('connection_failed', describeError('connection_failed'), { closeCode: info.code ?? null })
          : info.error;
        this._finish(info, error);
        return;
      }
      this._failures += 1;
    }
    this.attempt += 1;
    this.reason = reason;
    this.error = info.error || null;
    this.reconnectDelay = delay;
    this.retryAt = Date.now() + delay * 1000;
    clearTimeout(this._timer);
    this._timer = setTimeout(() => { this._timer = null; this._connect(); }, delay * 1000);
    this._setState('reconnecting', {
      delay, retryAt: this.retryAt, code: info.code ?? null, error: this.error,
      status: info.status ?? null, retryAfter: info.retryAfter ?? null,
    });
  }

  _setIdle() {
    clearTimeout(this._timer);
    this._timer = null;
    this.reconnectDelay = null;
    this.retryAt = null;
    this.reason = null;
    this._setState('idle');
  }

  _finish(info, error) {
    if (this.state === 'closed') return;
    clearTimeout(this._timer);
    this._timer = null;
    this.reconnectDelay = null;
    this.retryAt = null;
    this.error = error;
    this._discardHeld(this._ending === 'cancel' ? 'cancelled' : 'closed');
    this._setState('closed', { code: info.code, reason: this.reason, error });
    const failure = error || new StenoError('closed', 'The publisher closed.', { closeCode: info.code ?? null });
    for (const item of this._pendingFinalizes.splice(0)) item.waiter.reject(failure); // no effect once answered
    this._sent = [];
    this._resume = null;
    this._continuation = null;
    this._ready.reject(failure);
    if (this._endResult) {
      if (error) this._endResult.reject(error);
      else this._endResult.resolve(null); // no effect if `ended`/`cancelled` resolved it
    }
    const result = { code: info.code ?? null, reason: info.reason || '', wasClean: !!info.wasClean, error };
    this._closed.resolve(result);
    this._emit('close', result);
    this._finishIterators(error);
  }
}

/** Seconds of audio a held or sent item carries: declared silence carries none. */
function audioSeconds(item) {
  return item.silence ? 0 : item.seconds;
}
