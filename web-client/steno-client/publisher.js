// Part of steno-client.js, the module to import (its header documents StenoPublisher's options,
// events and properties): StenoPublisher, a publisher that outlives its connections. Its own
// methods are in three files: here its public methods, how each connection begins and what a
// session's events do; the audio it holds and sends again in publisher-audio.js; why and when it
// reconnects (and the switch to PCM) in publisher-reconnect.js.

import { StenoError } from './protocol.js';
import { streamUrl } from './addresses.js';
import { EventOwner, deferred } from './events.js';
import { StenoClient } from './client.js';
import { TIME_SLACK, publisherAudio } from './publisher-audio.js';
import { publisherReconnects } from './publisher-reconnect.js';

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

// The rest of its methods: the same class, in files of their own.
Object.assign(StenoPublisher.prototype, publisherAudio, publisherReconnects);
