// Part of steno-client.js, the module to import (its header documents StenoViewer's options,
// events and properties): StenoViewer, a read-only follower of a broadcast channel.

import { CLOSE_CODE_TO_ERROR, StenoError, describeError, viewerShouldReconnect } from './protocol.js';
import { listenUrl, probeStream } from './addresses.js';
import { EventOwner, deferred } from './events.js';

/**
 * A read-only viewer of a broadcast channel (`/v1/listen?channel=NAME`) that stays with the
 * channel: it reconnects with backoff when the connection drops, and does not deliver a
 * final twice when the backfill after a reconnect repeats finals it already delivered.
 */
export class StenoViewer extends EventOwner {
  constructor(url, channel, options = {}) {
    super();
    this.channel = channel;
    this.url = listenUrl(url, channel, { token: options.token, language: options.language });
    this.options = {
      reconnect: true, minDelay: 0.5, maxDelay: 30, jitter: 0.2, firstAttempts: 3, maxAttempts: Infinity, probe: true,
      ...options,
    };
    this.state = 'new';
    this.joined = null; // the last `joined` message
    this.publisher = null; // the last `publisher` message: the broadcast's state
    this.broadcasts = 0; // broadcasts seen (a `joined` that is not a resumption counts one)
    this.attempt = 0; // connection attempts that failed in a row
    this.reconnectDelay = null; // seconds to the next attempt while 'reconnecting'
    this.lastSeq = 0;
    this.error = null;

    this._socket = null;
    this._timer = null;
    this._everJoined = false;
    this._joinsOnSocket = 0;
    this._lastFinalEnd = -Infinity;
    this._ready = deferred();
    this._closed = deferred();
    this.ready = this._ready.promise;
    this.closed = this._closed.promise;
  }

  /** Connects (once); resolves with the first `joined`, rejects if the viewer ends before one. */
  start() {
    if (this.state === 'new') this._connect();
    return this.ready;
  }

  /** Stops following: closes the connection and cancels any reconnect. */
  close(code = 1000, reason = '') {
    if (this.state === 'closed') return this.closed;
    const socket = this._socket;
    this._socket = null;
    if (socket) {
      try { socket.close(code, reason); } catch { socket.close(); }
    }
    this._finish({ code, reason, wasClean: true }, null);
    return this.closed;
  }

  /** While waiting to reconnect, connect at once (e.g. when the device comes back online). */
  reconnectNow() {
    if (this.state !== 'reconnecting') return false;
    this._connect();
    return true;
  }

  // ---- internals -------------------------------------------------------------------------

  _setState(state, details = {}) {
    const previous = this.state;
    if (state === previous) return;
    this.state = state;
    this._emit('state', { state, previous, attempt: this.attempt, ...details });
  }

  _connect() {
    clearTimeout(this._timer);
    this._timer = null;
    this.reconnectDelay = null;
    const WS = this.options.WebSocket || globalThis.WebSocket;
    this._setState('connecting');
    let socket;
    try {
      if (!WS) throw new Error('no WebSocket implementation is available');
      socket = new WS(this.url);
    } catch (e) {
      this._finish({ code: null, reason: '', wasClean: false },
        new StenoError('connection_failed', `Could not connect: ${e.message}`));
      return;
    }
    this._socket = socket;
    this._joinsOnSocket = 0;
    let opened = false;
    socket.onopen = () => { opened = true; };
    socket.onmessage = (event) => { if (this._socket === socket) this._onMessage(event.data); };
    const closed = (event) => {
      if (this._socket !== socket) return; // closed by close() or replaced, or closed already
      this._socket = null;
      this._onSocketClose(event, opened);
    };
    // A refused handshake without onclose (Node 20's WebSocket) closes here, as StenoClient's.
    socket.onerror = () => {
      if (!opened) setTimeout(() => closed({ code: 1006, reason: '', wasClean: false }), 0);
    };
    socket.onclose = closed;
  }

  _onMessage(data) {
    let event = this._parseEvent(data);
    if (!event) return;
    if (event.type === 'joined') {
      // The first `joined` of a new connection with the broadcast's own start time continues
      // the broadcast this viewer already follows: its backfill repeats finals already delivered.
      const resumed = this._joinsOnSocket === 0 && this.joined !== null && event.startedAt === this.joined.startedAt;
      this._joinsOnSocket += 1;
      if (!resumed) {
        this.broadcasts += 1;
        this._lastFinalEnd = -Infinity;
      }
      event = { ...event, resumed };
      this.joined = event;
      this.attempt = 0;
      this._everJoined = true;
      this.error = null;
      this._setState('open');
      this._ready.resolve(event);
    } else if (event.type === 'publisher') {
      this.publisher = event;
    } else if (event.type === 'final' && typeof event.end === 'number') {
      // Finals of one broadcast never overlap and their ends increase: one ending where an
      // earlier one did (or before) is the backfill repeating it.
      if (event.end <= this._lastFinalEnd + 0.0005) return;
      this._lastFinalEnd = event.end;
    }
    this._deliver(event);
  }

  async _onSocketClose(event, opened) {
    const info = { code: event.code, reason: event.reason || '', wasClean: !!event.wasClean };
    if (!opened && !this._everJoined && this.options.probe) {
      // Never in: ask the server why (a plain GET of the listen address). A refused token or
      // origin would be refused again, so that ends the viewer with a plain reason.
      const answer = await probeStream(this.url, { fetch: this.options.fetch });
      if (this.state !== 'connecting' || this._socket !== null) return; // closed or reconnected meanwhile
      if (answer.reason === 'unauthorized' || answer.reason === 'forbidden') {
        this._finish(info, new StenoError(answer.reason, describeError(answer.reason), { status: answer.status }));
        return;
      }
    }
    let error;
    if (!opened) {
      error = new StenoError('connection_failed',
        'Could not connect to the captioning server (it may be down, or refusing the token).', { closeCode: info.code });
    } else {
      const code = CLOSE_CODE_TO_ERROR.get(info.code) || (info.code === 1000 ? 'closed' : 'connection_lost');
      error = new StenoError(code, info.reason && info.reason !== code ? info.reason : describeError(code),
        { closeCode: info.code });
    }
    const limit = this._everJoined ? this.options.maxAttempts : this.options.firstAttempts;
    const retry = this.options.reconnect && (!opened || viewerShouldReconnect(info.code)) && this.attempt < limit;
    if (!retry) {
      this._finish(info, info.code === 1000 && opened ? null : error);
      return;
    }
    const { minDelay, maxDelay, jitter } = this.options;
    const base = info.code === 4008 && this.attempt === 0 ? 0 : Math.min(maxDelay, minDelay * 2 ** this.attempt);
    const delay = base * (1 - jitter + Math.random() * 2 * jitter);
    this.attempt += 1;
    this.reconnectDelay = delay;
    this.error = error;
    this._timer = setTimeout(() => { this._timer = null; this._connect(); }, delay * 1000);
    this._setState('reconnecting', { delay, code: info.code, reason: info.reason, error });
  }

  _finish(info, error) {
    if (this.state === 'closed') return;
    clearTimeout(this._timer);
    this._timer = null;
    this.reconnectDelay = null;
    this.error = error;
    this._setState('closed', { code: info.code, reason: info.reason, error });
    this._ready.reject(error || new StenoError('closed', 'The viewer was closed.', { closeCode: info.code }));
    const result = { ...info, error };
    this._closed.resolve(result);
    this._emit('close', result);
    this._finishIterators(error);
  }
}
