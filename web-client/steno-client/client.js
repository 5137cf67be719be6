// Part of steno-client.js, the module to import (its header documents StenoClient's options,
// methods, events and properties): StenoClient, one session on one connection.

import { CLOSE_CODE_TO_ERROR, StenoError, describeError } from './protocol.js';
import { streamUrl } from './addresses.js';
import { opusPacketSamples, pcmPieces, toBytes } from './audio-data.js';
import { EventOwner, deferred } from './events.js';
// StenoClient.listen and StenoClient.publish make these; publisher.js imports StenoClient in
// turn. Each is used only when called, so the circle is harmless.
import { StenoViewer } from './viewer-client.js';
import { StenoPublisher } from './publisher.js';

export class StenoClient extends EventOwner {
  /** Construct, then await start(). */
  static async connect(url, options = {}) {
    const client = new StenoClient(url, options);
    await client.start();
    return client;
  }

  /**
   * Follows a broadcast channel: a StenoViewer, already connecting. Use its callbacks or
   * `for await (const event of StenoClient.listen(url, 'studio-a')) …`.
   */
  static listen(url, channel, options = {}) {
    const viewer = new StenoViewer(url, channel, options);
    viewer.start().catch(() => {}); // the outcome arrives as events, `ready` and `closed`
    return viewer;
  }

  /**
   * Publishes audio that outlives dropped connections: a StenoPublisher, already connecting.
   */
  static publish(url, options = {}) {
    const publisher = new StenoPublisher(url, options);
    publisher.start().catch(() => {}); // the outcome arrives as events, `ready` and `closed`
    return publisher;
  }

  constructor(url, options = {}) {
    super();
    const audio = { encoding: 'pcm_s16le', sampleRate: 16000, channels: 1, ...(options.audio || {}) };
    if (!['pcm_s16le', 'pcm_f32le', 'opus'].includes(audio.encoding)) {
      // Let the server judge unknown encodings (it answers unsupported_audio), but warn early.
      console.warn?.(`steno-client: unknown audio encoding ${audio.encoding}`);
    }
    this.url = streamUrl(url, { token: options.token });
    if (options.resume?.session) {
      // A client coming back for its session is admitted even while the server is too busy
      // for new ones: the handshake says which session it comes for.
      const address = new URL(this.url);
      address.searchParams.set('resume', options.resume.session);
      this.url = address.toString();
    }
    this.options = { volatile: true, words: true, maxFrameBytes: 32768, ...options, audio };
    this.state = 'new';
    this.session = null;
    this.readyMessage = null;
    this.error = null;
    this.lag = null;
    this.lastSeq = 0;
    this.sentSeconds = 0;

    this._socket = null;
    this._outbox = []; // frames waiting for `ready`: strings or ArrayBuffers
    this._outboxBytes = 0;
    this._carry = null; // PCM bytes that did not fill a whole sample frame yet
    this._lastOpusSamples = 960; // duration given to an Opus packet whose header is malformed
    this._finalizeWaiters = [];
    this._gapWaiters = [];
    this._ended = deferred();
    this._cancelled = deferred();
    this._endRequested = false;
    this._cancelRequested = false;
    this._ready = deferred();
    this._closed = deferred();
    this.ready = this._ready.promise;
    this.closed = this._closed.promise;
  }

  get bufferedAmount() {
    return (this._socket ? this._socket.bufferedAmount : 0) + this._outboxBytes;
  }

  // ---- lifecycle -------------------------------------------------------------------------

  start() {
    if (this.state !== 'new') return this.ready;
    const WS = this.options.WebSocket || globalThis.WebSocket;
    if (!WS) {
      const err = new StenoError('connection_failed', 'No WebSocket implementation is available.');
      this._finish({ code: null, reason: '', wasClean: false }, err);
      return this.ready;
    }
    this.state = 'connecting';
    let socket;
    try {
      socket = new WS(this.url);
    } catch (e) {
      this._finish({ code: null, reason: '', wasClean: false },
        new StenoError('connection_failed', `Could not connect: ${e.message}`));
      return this.ready;
    }
    this._socket = socket;
    this._opened = false;
    socket.binaryType = 'arraybuffer';
    socket.onopen = () => {
      this._opened = true;
      const { audio, language, model, volatile, words, channel, phrases, profanity, start, resume, continues } = this.options;
      if (resume) {
        // Continue a session whose connection dropped: the server replays the events after
        // `after`, then says `resumed`; nothing else may be sent before that.
        const { session, resumeToken, after = 0 } = resume;
        socket.send(JSON.stringify({ type: 'resume', session, resumeToken, after }));
        return;
      }
      const message = { type: 'start', audio, volatile, words, ...(start || {}) };
      if (language) message.language = language;
      if (model) message.model = model;
      if (channel) message.channel = channel;
      if (channel && continues) message.continues = continues;
      if (phrases && phrases.length) message.phrases = phrases;
      if (profanity) message.profanity = profanity;
      socket.send(JSON.stringify(message));
    };
    socket.onmessage = (event) => this._onMessage(event.data);
    // Browsers follow an error with onclose, which carries the code; Node 20's WebSocket does
    // not when the handshake is refused (a 503 or 401 answer): the socket is closed here then.
    socket.onerror = () => {
      if (!this._opened) setTimeout(() => this._onClose({ code: 1006, reason: '', wasClean: false }), 0);
    };
    socket.onclose = (event) => this._onClose(event);
    return this.ready;
  }

  sendAudio(data) {
    if (this._endRequested || this._cancelRequested || this.state === 'closed') {
      throw new StenoError('closed', 'Audio cannot be sent after end(), cancel() or close.');
    }
    if (this.state === 'new') this.start();
    const { encoding } = this.options.audio;
    if (encoding === 'opus') {
      if (data instanceof Float32Array) throw new TypeError('sendAudio: Opus takes encoded packets, not samples');
      const packet = toBytes(data, 'opus');
      // As the server counts: a packet whose header cannot be read lasts as long as the last
      // good one (20 ms before any).
      const samples = opusPacketSamples(packet) || this._lastOpusSamples;
      this._lastOpusSamples = samples;
      this.sentSeconds += samples / 48000;
      this._send(packet.slice().buffer); // a copy: the caller may reuse its buffer
      return this.sentSeconds;
    }
    const { pieces, frameBytes, carry } = pcmPieces(data, encoding, this.options.audio.channels || 1, this._carry,
      this.options.maxFrameBytes);
    this._carry = carry;
    let sent = 0;
    for (const piece of pieces) {
      this._send(piece.buffer); // a copy we own
      sent += piece.byteLength;
    }
    this.sentSeconds += sent / frameBytes / this.options.audio.sampleRate;
    return this.sentSeconds;
  }

  finalize(through) {
    const refused = this._control('finalize');
    if (refused) return refused;
    const waiter = deferred();
    this._finalizeWaiters.push(waiter);
    const message = { type: 'finalize' };
    if (through != null) message.through = through;
    this._send(JSON.stringify(message));
    return waiter.promise;
  }

  /**
   * Declares `seconds` of audio this client does not have (e.g. lost while disconnected): the
   * session's timeline advances without audio. Resolves with the server's `gap` event.
   */
  gap(seconds) {
    if (!(seconds > 0)) return Promise.reject(new TypeError('gap: the duration must be more than 0 seconds'));
    const refused = this._control('gap');
    if (refused) return refused;
    const waiter = deferred();
    this._gapWaiters.push(waiter);
    this._send(JSON.stringify({ type: 'gap', duration: Math.round(seconds * 1e6) / 1e6 }));
    this.sentSeconds += seconds;
    return waiter.promise;
  }

  /**
   * Declares `seconds` of silence this client leaves out instead of sending it (see
   * SilenceSuppressor): the session's timeline advances as if it had been sent, and nothing
   * is reported. Queued like audio until the session is ready. Returns `sentSeconds`.
   */
  silence(seconds) {
    if (this._endRequested || this._cancelRequested || this.state === 'closed') {
      throw new StenoError('closed', 'Silence cannot be declared after end(), cancel() or close.');
    }
    if (!(seconds > 0)) throw new TypeError('silence: the duration must be more than 0 seconds');
    if (this.state === 'new') this.start();
    // Exact to the microsecond (the server counts it in samples); at most an hour a message.
    for (let left = seconds; left > 1e-7; left -= 3600) {
      this._send(JSON.stringify({ type: 'silence', duration: Math.round(Math.min(left, 3600) * 1e6) / 1e6 }));
    }
    this.sentSeconds += seconds;
    return this.sentSeconds;
  }

  end() {
    if (this._endRequested) return this._ended.promise;
    const refused = this._control('end');
    if (refused) return refused;
    this._endRequested = true;
    this._send(JSON.stringify({ type: 'end' }));
    if (this.state === 'ready') this.state = 'ending';
    return this._ended.promise;
  }

  cancel() {
    if (this._cancelRequested) return this._cancelled.promise;
    const refused = this._control('cancel');
    if (refused) return refused;
    this._cancelRequested = true;
    this._outbox = this._outbox.filter((item) => typeof item === 'string'); // unsent audio is moot
    this._outboxBytes = 0;
    this._send(JSON.stringify({ type: 'cancel' }));
    if (this.state === 'ready') this.state = 'ending';
    return this._cancelled.promise;
  }

  close(code = 1000, reason = '') {
    if (this._socket && this.state !== 'closed') {
      this._localClose = true;
      try { this._socket.close(code, reason); } catch { this._socket.close(); }
    } else if (this.state === 'new') {
      this._finish({ code: null, reason: '', wasClean: true }, new StenoError('closed', 'Closed before start.'));
    }
    return this.closed;
  }

  // ---- internals -------------------------------------------------------------------------

  /** Returns a rejected promise when `name` is not allowed now, else undefined. */
  _control(name) {
    let error = null;
    if (this.state === 'closed') {
      error = this.error || new StenoError('closed', `Cannot ${name}: the session is closed.`);
    } else if ((this._endRequested || this._cancelRequested) && name !== 'cancel') {
      error = new StenoError('closed', `Cannot ${name} after end() or cancel().`);
    }
    if (error) return Promise.reject(error);
    if (this.state === 'new') this.start();
    return undefined;
  }

  _send(item) {
    const size = typeof item === 'string' ? 0 : item.byteLength;
    if (this.state === 'ready' || this.state === 'ending') {
      // The server may have closed already (a drain: 1001) while `close` has not reached
      // us yet (CLOSING or CLOSED): a send then only makes the browser log an error.
      if (!(this._socket.readyState >= 2)) this._socket.send(item);
    } else {
      this._outbox.push(item);
      this._outboxBytes += size;
    }
  }

  _onMessage(data) {
    const event = this._parseEvent(data);
    if (!event) return;

    switch (event.type) {
      case 'ready':
      case 'resumed':
        // `resumed` is a resuming connection's `ready`: from it on, audio continues the
        // session's timeline at `received`.
        if (this.state !== 'connecting' || (event.type === 'resumed') !== !!this.options.resume) break;
        this.session = event.session ?? null;
        this.readyMessage = event;
        if (event.type === 'resumed' && typeof event.received === 'number') this.sentSeconds += event.received;
        this.state = this._endRequested || this._cancelRequested ? 'ending' : 'ready';
        for (const item of this._outbox) this._socket.send(item);
        this._outbox = [];
        this._outboxBytes = 0;
        this._ready.resolve(event);
        break;
      case 'gap':
        this._gapWaiters.shift()?.resolve(event);
        break;
      case 'progress':
        if (typeof event.received === 'number' && typeof event.analyzed === 'number') {
          this.lag = Math.max(0, event.received - event.analyzed);
        }
        break;
      case 'finalized':
        this._finalizeWaiters.shift()?.resolve(event);
        break;
      case 'ended':
        this._ended.resolve(event);
        break;
      case 'cancelled':
        this._cancelled.resolve(event);
        break;
      case 'error':
        if (event.fatal) {
          this.error = new StenoError(event.code || 'internal', event.message || describeError(event.code), { fatal: true });
        }
        break;
      default:
        break;
    }
    this._deliver(event);
  }

  _onClose(event) {
    const info = { code: event.code, reason: event.reason || '', wasClean: !!event.wasClean };
    const finishedNormally = info.code === 1000 && (this._endRequested || this._cancelRequested || this._localClose);
    let error = null;
    if (!finishedNormally) {
      if (this.error) {
        error = this.error;
        error.closeCode = info.code;
      } else if (!this._opened) {
        error = new StenoError('connection_failed',
          'Could not connect to the captioning server (it may be down, full, or refusing the token).',
          { closeCode: info.code });
      } else if (info.code === 1000) {
        error = new StenoError('closed', info.reason || 'The server closed the session.', { closeCode: 1000 });
      } else if (this._localClose) {
        error = new StenoError('closed', 'The session was closed by the client.', { closeCode: info.code });
      } else {
        const code = CLOSE_CODE_TO_ERROR.get(info.code) || 'connection_lost';
        error = new StenoError(code, info.reason || describeError(code), { closeCode: info.code });
      }
    }
    this._finish(info, error);
  }

  _finish(info, error) {
    if (this.state === 'closed') return;
    this.state = 'closed';
    this.error = error;
    const reason = error || new StenoError('closed', 'The session closed.', { closeCode: info.code });
    this._ready.reject(reason);
    for (const waiter of this._finalizeWaiters.splice(0)) waiter.reject(reason);
    for (const waiter of this._gapWaiters.splice(0)) waiter.reject(reason);
    this._ended.reject(reason); // no effect if `ended` already resolved it
    this._cancelled.reject(reason);
    const result = { ...info, error };
    this._closed.resolve(result);
    this._emit('close', result);
    this._finishIterators(error);
  }
}
