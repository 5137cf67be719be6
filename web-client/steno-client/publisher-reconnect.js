// Part of steno-client.js, the module to import (its header documents StenoPublisher): why and
// when a StenoPublisher connects again after a connection closed — a resume, a new session, a
// wait with backoff or for the server's Retry-After, idle, or the end — and its switch from Opus
// to PCM when the server refuses Opus. These are StenoPublisher's own methods (publisher.js puts
// them on its prototype), using its fields as its other methods do.

import { StenoError, describeError, shouldReconnect } from './protocol.js';
import { probeStream } from './addresses.js';

/** StenoPublisher's methods that decide what follows a closed connection. */
export const publisherReconnects = {
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
  },

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
  },

  _jittered(seconds, onlyLater = false) {
    const { jitter } = this.options;
    const factor = onlyLater ? 1 + Math.random() * jitter : 1 - jitter + Math.random() * 2 * jitter;
    return seconds * factor;
  },

  _backoff(cap = this.options.maxDelay) {
    const { minDelay, maxDelay } = this.options;
    return this._jittered(Math.min(cap, maxDelay, minDelay * 2 ** this.attempt));
  },

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
  },

  _setIdle() {
    clearTimeout(this._timer);
    this._timer = null;
    this.reconnectDelay = null;
    this.retryAt = null;
    this.reason = null;
    this._setState('idle');
  },
};
