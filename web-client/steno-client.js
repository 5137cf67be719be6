/**
 * steno-client.js — the Steno live-captioning protocol (version 1) as one small ES module:
 * StenoClient publishes audio and receives its captions; StenoViewer follows a broadcast channel.
 *
 * No dependencies. Works in browsers and in any runtime with a standard `WebSocket`
 * (Node 20 with `--experimental-websocket`, Node 22+, Deno, Bun), or with a WebSocket
 * constructor passed in as `options.WebSocket`.
 *
 *   import { StenoClient } from './steno-client.js';
 *
 *   const client = new StenoClient('wss://captions.example.org', {
 *     audio: { encoding: 'pcm_s16le', sampleRate: 16000, channels: 1 },
 *     token: 'secret',                 // sent as ?token= (browsers cannot set headers)
 *   });
 *   client.on('final', (e) => console.log(e.start, e.end, e.text));
 *   const ready = await client.start();         // resolves on `ready`
 *   client.sendAudio(int16Samples);              // ArrayBuffer, typed array or EncodedAudioChunk
 *   await client.finalize();                     // resolves on `finalized` → {through}
 *   const { duration } = await client.end();     // resolves on `ended`
 *
 * new StenoClient(url, options)
 *   url      ws://, wss://, http:// or https:// address of the server. http(s) becomes ws(s);
 *            a URL with no path (or "/") gets the stream path "/v1/stream".
 *   options  audio     {encoding: 'pcm_s16le'|'pcm_f32le'|'opus', sampleRate, channels}
 *                      (default pcm_s16le, 16000 Hz, mono)
 *            language  e.g. 'en-US' (optional)
 *            volatile  ask for volatile results (default true)
 *            words     ask for word timings in results (default true)
 *            channel   publish to this broadcast channel (optional)
 *            token     access token, added to the URL as ?token=
 *            start     extra fields merged into the `start` message (optional)
 *            WebSocket the WebSocket constructor to use (default globalThis.WebSocket)
 *            maxFrameBytes  PCM is split into binary frames of at most this size (default 32768)
 *
 * StenoClient.connect(url, options) → Promise<StenoClient>  constructs and awaits start().
 *
 * Methods
 *   start()            Opens the socket and sends `start`. Resolves with the `ready` message;
 *                      rejects with a StenoError if the session ends first. Idempotent.
 *   sendAudio(data)    Queues one piece of audio; it is sent once the session is ready.
 *                      - Float32Array: samples in [-1, 1], converted to the session's PCM
 *                        encoding (s16le or f32le). Not allowed for Opus.
 *                      - any other ArrayBuffer / typed array / DataView: sent byte for byte
 *                        (Int16Array on a little-endian platform, which every browser is).
 *                      - EncodedAudioChunk (WebCodecs): its bytes, one Opus packet per frame.
 *                      PCM is re-cut into whole sample frames of at most maxFrameBytes; an Opus
 *                      packet is always sent as one frame. Returns the seconds of audio sent
 *                      so far (see `sentSeconds`).
 *   finalize(through?) Sends `finalize` (optionally only through T seconds). Resolves with the
 *                      `finalized` message ({through}). Several may be outstanding.
 *   end()              Sends `end`. Resolves with the `ended` message ({duration}) once it
 *                      arrives. No audio may be sent after it.
 *   cancel()           Sends `cancel`. Resolves with the `cancelled` message ({through}).
 *   close(code?, reason?)  Closes the socket at once (no `end`); pending promises reject.
 *   on(type, fn)       Adds a callback; returns a function that removes it. `type` is a server
 *                      event type ('ready', 'volatile', 'final', 'speech', 'progress', 'error',
 *                      'finalized', 'ended', 'cancelled', …), 'event' for every server event,
 *                      or 'close' for the end of the connection ({code, reason, wasClean, error}).
 *   off(type, fn)      Removes a callback.
 *   events()           An async iterator over every server event from now on, in order. It
 *                      finishes when the session closes normally and throws a StenoError when
 *                      it ends because of a fatal error or a lost connection. `for await (const
 *                      e of client)` does the same. Each iterator has its own queue.
 *
 * Properties
 *   state          'new' | 'connecting' | 'ready' | 'ending' | 'closed'
 *   session        the session id from `ready` (null before)
 *   readyMessage   the whole `ready` message (null before)
 *   ready          Promise of the `ready` message (same as start())
 *   closed         Promise that always resolves, with {code, reason, wasClean, error}
 *   error          the StenoError that ended the session, if any
 *   lag            received − analyzed from the last `progress`, in seconds (null before one)
 *   bufferedAmount bytes queued in the socket and not yet sent (backpressure), plus audio
 *                  waiting for `ready`
 *   sentSeconds    seconds of audio sent (PCM from byte counts, Opus from packet TOC bytes; a
 *                  packet with a malformed header counts as long as the last good one, as on
 *                  the server)
 *   lastSeq        `seq` of the last server event
 *
 * Errors
 *   StenoError extends Error with `code` (a protocol code such as 'unsupported_audio', or
 *   'connection_failed' / 'connection_lost' / 'closed' for transport problems), `message`,
 *   `closeCode` (the WebSocket close code, when there was one) and `fatal`.
 *   Non-fatal server errors ('bad_message', 'bad_audio') arrive only as 'error' events.
 *   Promises still pending when the session closes reject with the StenoError that ended it.
 *
 * Following a broadcast channel (read-only)
 *
 *   const viewer = StenoClient.listen('https://captions.example.org', 'studio-a', { token });
 *   viewer.on('joined', (e) => e.resumed || startNewSection(e.startedAt));
 *   viewer.on('final', (e) => addLine(e.start, e.end, e.text));
 *   viewer.on('volatile', (e) => showGuess(e.text));
 *   viewer.on('state', (s) => showStatus(s.state, s.delay, s.error));
 *   // or: for await (const event of viewer) { … }
 *
 * StenoClient.listen(url, channel, options) → StenoViewer, already connecting.
 * new StenoViewer(url, channel, options)
 *   url      the server (https://host), its stream address (wss://host/v1/stream) or its
 *            listen address; the viewer connects to <prefix>/v1/listen?channel=NAME[&token=T].
 *   options  token         access token, added as ?token=
 *            reconnect     reconnect when the connection drops (default true)
 *            minDelay, maxDelay   backoff: minDelay·2^n seconds, at most maxDelay (0.5, 30),
 *                          ±jitter (0.2 = ±20 %); 0 for the first retry after a 4008
 *            firstAttempts reconnects tried before the first `joined` (default 3: a server that
 *                          was never reached is more likely wrong than down)
 *            maxAttempts   reconnects in a row after that (default Infinity)
 *            WebSocket     the WebSocket constructor to use
 *   start()          connects; resolves with the first `joined`, rejects (StenoError) if the
 *                    viewer ends before one. Idempotent.
 *   close()          stops following (no reconnect); `closed` resolves.
 *   reconnectNow()   while waiting to reconnect, connect at once.
 *   on/off/events()  as for StenoClient. Server events: 'joined', 'final', 'volatile',
 *                    'speech', 'error' (non-fatal), 'event' (all of them); and
 *                    'state'  {state, previous, attempt, delay?, code?, reason?, error?} on every
 *                             change of `state`: 'connecting' → 'open' (a `joined` arrived) →
 *                             'reconnecting' (delay = seconds until the next try, error = why)
 *                             → 'connecting' … → 'closed';
 *                    'close'  {code, reason, wasClean, error} once, when the viewer ends.
 *                    The async iterator yields the server events across reconnects; it ends
 *                    on close() or a close that means "do not retry" (1000), and throws the
 *                    StenoError of any other end (e.g. a server that could not be reached).
 *   Across reconnects: each `joined` carries an added `resumed` field, true when it is the
 *   first `joined` of a new connection and has the `startedAt` of the broadcast already
 *   followed (the same publisher). The backfill finals after it that were delivered before
 *   are dropped, so every final arrives once. A `joined` with `resumed: false` is a new
 *   broadcast (a new publisher, whose timeline starts again at 0).
 *   Properties: state ('new' | 'connecting' | 'open' | 'reconnecting' | 'closed'), channel,
 *   url, joined (the last `joined`), broadcasts (how many were seen), attempt,
 *   reconnectDelay, lastSeq, error, ready, closed.
 *
 * Helpers
 *   streamUrl(base, {token, path})  the WebSocket URL the client would use
 *   listenUrl(base, channel, {token})            a viewer's WebSocket URL
 *   captionsUrl(base, channel, 'vtt'|'srt'|'txt', {token})  the channel's captions over HTTP
 *   isChannelName(name)             1–64 letters, digits, '-', '_', '.' (not '.' or '..')
 *   shouldReconnect(closeCode)      whether reconnecting after this close code makes sense
 *   viewerShouldReconnect(closeCode)  the same for a viewer (only 1000 and protocol or
 *                                   policy closes end a viewer)
 *   describeError(code)             a plain-language sentence for a protocol or close code
 *   opusPacketSamples(bytes)        samples at 48 kHz in one Opus packet (RFC 6716 TOC), 0 when
 *                                   malformed or longer than 120 ms (as the server reads it)
 */

export const PROTOCOL_VERSION = 1;
export const DEFAULT_STREAM_PATH = '/v1/stream';
export const DEFAULT_LISTEN_PATH = '/v1/listen';

/** Close codes of the protocol, by name. */
export const CloseCode = Object.freeze({
  NORMAL: 1000,
  SHUTTING_DOWN: 1001,
  UNSUPPORTED_AUDIO: 1003,
  NO_STATUS: 1005,
  ABNORMAL: 1006,
  TOO_LARGE: 1009,
  INTERNAL: 1011,
  SERVICE_RESTART: 1012,
  TRY_AGAIN_LATER: 1013,
  SLOW_CONSUMER: 4008,
  SESSION_LIMIT: 4009,
  IDLE: 4010,
  NOT_STARTED: 4400,
});

const CLOSE_CODE_TO_ERROR = new Map([
  [1001, 'shutting_down'],
  [1003, 'unsupported_audio'],
  [1009, 'too_large'],
  [1011, 'internal'],
  [4008, 'slow_consumer'],
  [4009, 'session_limit'],
  [4010, 'idle'],
  [4400, 'not_started'],
]);

const ERROR_SENTENCES = {
  bad_message: 'The server did not understand a message from this client.',
  bad_audio: 'Some audio could not be decoded, so a few words may be missing.',
  not_started: 'The client sent audio or a command before starting the session (a client bug).',
  unsupported_audio: 'The server cannot accept this audio format.',
  too_large: 'A piece of audio was larger than the server accepts.',
  slow_consumer: 'The connection could not keep up with the captions, so the server closed it.',
  session_limit: 'The session reached its maximum length; its captions were finalized.',
  idle: 'The session was closed because no audio arrived for a while.',
  shutting_down: 'The server is shutting down; captions so far were finalized.',
  internal: 'The server had an internal error; the captions finalized so far are kept.',
  connection_failed: 'Could not connect to the captioning server.',
  connection_lost: 'The connection to the captioning server was lost.',
  closed: 'The session is closed.',
};

/**
 * A plain-language sentence for a protocol error code ('idle', …) or a close code (4010, …).
 */
export function describeError(code) {
  if (typeof code === 'number') code = CLOSE_CODE_TO_ERROR.get(code) ?? (code === 1005 || code === 1006 ? 'connection_lost' : '');
  return ERROR_SENTENCES[code] ?? `The captioning server reported a problem (${code || 'unknown'}).`;
}

/**
 * Whether a client should open a new session after the connection closed with this code
 * while it still had audio to send. Retry: a dropped connection (1006/1005), a server going
 * away or restarting (1001, 1012, 1013), an internal error (1011, a fresh session may work),
 * a slow link (4008) and the maximum session length (4009: carry on in a new session).
 * Never: a normal close (1000), or codes that would only repeat (1003 unsupported audio,
 * 1009 too large, 4400 protocol misuse) or mean nobody is sending (4010 idle).
 */
export function shouldReconnect(closeCode) {
  switch (closeCode) {
    case 1001: case 1005: case 1006: case 1011: case 1012: case 1013: case 1014:
    case 4008: case 4009:
      return true;
    default:
      return false;
  }
}

/** The WebSocket URL for a server address, with ?token= added when given. */
export function streamUrl(base, { token, path = DEFAULT_STREAM_PATH } = {}) {
  const url = new URL(String(base), globalThis.location?.href);
  if (url.protocol === 'http:') url.protocol = 'ws:';
  else if (url.protocol === 'https:') url.protocol = 'wss:';
  if (url.protocol !== 'ws:' && url.protocol !== 'wss:') {
    throw new TypeError(`not a WebSocket or HTTP address: ${base}`);
  }
  if (url.pathname === '' || url.pathname === '/') url.pathname = path;
  if (token != null && token !== '') url.searchParams.set('token', token);
  url.hash = '';
  return url.toString();
}

/** Whether `name` is a valid broadcast channel name: 1–64 letters, digits, '-', '_', '.', not '.' or '..'. */
export function isChannelName(name) {
  return typeof name === 'string' && /^[A-Za-z0-9._-]{1,64}$/.test(name) && name !== '.' && name !== '..';
}

/** `base` as a URL with the scheme set for `kind` ('ws' or 'http'), keeping the security. */
function serverUrl(base, kind) {
  const url = new URL(String(base), globalThis.location?.href);
  const secure = url.protocol === 'https:' || url.protocol === 'wss:';
  if (!['http:', 'https:', 'ws:', 'wss:'].includes(url.protocol)) {
    throw new TypeError(`not a WebSocket or HTTP address: ${base}`);
  }
  url.protocol = kind === 'ws' ? (secure ? 'wss:' : 'ws:') : (secure ? 'https:' : 'http:');
  url.hash = '';
  url.search = '';
  return url;
}

/** The path in front of the server's own routes: '' for 'https://host/v1/stream', '/steno' for '…/steno/v1/listen'. */
function routePrefix(pathname) {
  for (const route of [DEFAULT_STREAM_PATH, DEFAULT_LISTEN_PATH]) {
    if (pathname.endsWith(route)) return pathname.slice(0, -route.length);
  }
  return pathname.replace(/\/+$/, '');
}

/**
 * The viewer WebSocket URL of a channel: `base` may be the server (`https://host`), its stream
 * address (`wss://host/v1/stream`, as the publishing page shows it) or its listen address.
 */
export function listenUrl(base, channel, { token } = {}) {
  if (!isChannelName(channel)) throw new TypeError(`not a channel name: ${channel}`);
  const url = serverUrl(base, 'ws');
  url.pathname = routePrefix(url.pathname) + DEFAULT_LISTEN_PATH;
  url.searchParams.set('channel', channel);
  if (token != null && token !== '') url.searchParams.set('token', token);
  return url.toString();
}

/** The HTTP address of a channel's captions so far: format 'vtt', 'srt' or 'txt'. */
export function captionsUrl(base, channel, format = 'vtt', { token } = {}) {
  if (!isChannelName(channel)) throw new TypeError(`not a channel name: ${channel}`);
  if (!['vtt', 'srt', 'txt'].includes(format)) throw new TypeError(`no captions format ${format}`);
  const url = serverUrl(base, 'http');
  url.pathname = `${routePrefix(url.pathname)}/v1/channels/${channel}/captions.${format}`;
  if (token != null && token !== '') url.searchParams.set('token', token);
  return url.toString();
}

/**
 * Whether a viewer should connect again after its connection closed with this code. Only
 * closes that a new connection would repeat end a viewer: 1000 (the server ended it), 1002,
 * 1003, 1007, 1008, 1009, 1010 and 4400 (protocol or policy problems). Everything else — a
 * lost connection (1006), the server shutting down or restarting (1001, 1012), an internal
 * error (1011), a slow link (4008) — is worth another try.
 */
export function viewerShouldReconnect(closeCode) {
  return ![1000, 1002, 1003, 1007, 1008, 1009, 1010, 4400].includes(closeCode);
}

/** The longest Opus packet RFC 6716 allows: 120 ms, in 48 kHz samples. */
export const OPUS_MAX_PACKET_SAMPLES = 5760;

/**
 * Samples at 48 kHz held by one Opus packet, from its TOC byte (RFC 6716, section 3.1),
 * or 0 if the header is malformed: an empty packet, code 3 without its frame-count byte or
 * with 0 frames, or more than 120 ms in all. The same rule as the server's (OpusPacket.swift).
 */
export function opusPacketSamples(bytes) {
  if (!bytes || bytes.length < 1) return 0;
  const toc = bytes[0];
  const config = toc >> 3;
  let frame; // samples at 48 kHz per frame
  if (config < 12) frame = [480, 960, 1920, 2880][config & 3]; // SILK: 10, 20, 40, 60 ms
  else if (config < 16) frame = (config & 1) ? 960 : 480; // hybrid: 10, 20 ms
  else frame = [120, 240, 480, 960][config & 3]; // CELT: 2.5, 5, 10, 20 ms
  const code = toc & 3;
  let frames;
  if (code === 0) frames = 1;
  else if (code === 1 || code === 2) frames = 2;
  else {
    if (bytes.length < 2) return 0;
    frames = bytes[1] & 0x3f;
  }
  const total = frames * frame;
  return total <= OPUS_MAX_PACKET_SAMPLES ? total : 0;
}

/** An error of a Steno session: a protocol code, a message, and the close code if any. */
export class StenoError extends Error {
  constructor(code, message, { closeCode = null, fatal = true } = {}) {
    super(message || describeError(code));
    this.name = 'StenoError';
    this.code = code;
    this.closeCode = closeCode;
    this.fatal = fatal;
  }
}

function deferred() {
  let resolve, reject;
  const promise = new Promise((res, rej) => { resolve = res; reject = rej; });
  promise.catch(() => {}); // callers who await it still see the rejection
  return { promise, resolve, reject };
}

/**
 * An async iterator over the events `owner` (a StenoClient or StenoViewer) delivers from now
 * on. The owner pushes to every sink in `owner._iterators` and finishes them when it closes;
 * `owner.state === 'closed'` and `owner.error` describe a finished owner.
 */
function eventIterator(owner) {
  const queue = [];
  let wake = null;
  let done = owner.state === 'closed';
  let failure = done ? owner.error : null;
  const sink = {
    push: (event) => { queue.push(event); wake?.(); },
    finish: (error) => { done = true; failure = error; wake?.(); },
  };
  if (!done) owner._iterators.add(sink);
  const iterator = {
    next: async () => {
      while (queue.length === 0 && !done) {
        await new Promise((resolve) => { wake = resolve; });
        wake = null;
      }
      if (queue.length) return { value: queue.shift(), done: false };
      if (failure) { const f = failure; failure = null; throw f; }
      return { value: undefined, done: true };
    },
    return: async () => {
      owner._iterators.delete(sink);
      done = true;
      queue.length = 0;
      failure = null;
      return { value: undefined, done: true };
    },
    [Symbol.asyncIterator]() { return iterator; },
  };
  return iterator;
}

const BYTES_PER_SAMPLE = { pcm_s16le: 2, pcm_f32le: 4 };

/** What StenoClient and StenoViewer share: callbacks and async iterators over server events. */
class EventOwner {
  constructor() {
    this._listeners = new Map();
    this._iterators = new Set();
  }

  on(type, fn) {
    if (!this._listeners.has(type)) this._listeners.set(type, new Set());
    this._listeners.get(type).add(fn);
    return () => this.off(type, fn);
  }

  off(type, fn) {
    this._listeners.get(type)?.delete(fn);
  }

  events() {
    return eventIterator(this);
  }

  [Symbol.asyncIterator]() {
    return this.events();
  }

  /** A server event from a WebSocket message (the server sends only JSON text); null if not one. */
  _parseEvent(data) {
    if (typeof data !== 'string') return null;
    let event;
    try {
      event = JSON.parse(data);
    } catch {
      return null;
    }
    if (!event || typeof event.type !== 'string') return null;
    if (typeof event.seq === 'number') this.lastSeq = event.seq;
    return event;
  }

  /** A server event to the callbacks of its type, the 'event' callbacks and the iterators. */
  _deliver(event) {
    this._emit(event.type, event);
    this._emit('event', event);
    for (const sink of this._iterators) sink.push(event);
  }

  _emit(type, payload) {
    for (const fn of [...(this._listeners.get(type) || [])]) {
      try {
        fn(payload, this);
      } catch (e) {
        // A failing callback must not break the protocol handling.
        setTimeout(() => { throw e; });
      }
    }
  }

  /** Ends every iterator: normally, or by throwing `error`. */
  _finishIterators(error) {
    for (const sink of this._iterators) sink.finish(error);
    this._iterators.clear();
  }
}

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

  constructor(url, options = {}) {
    super();
    const audio = { encoding: 'pcm_s16le', sampleRate: 16000, channels: 1, ...(options.audio || {}) };
    if (!['pcm_s16le', 'pcm_f32le', 'opus'].includes(audio.encoding)) {
      // Let the server judge unknown encodings (it answers unsupported_audio), but warn early.
      console.warn?.(`steno-client: unknown audio encoding ${audio.encoding}`);
    }
    this.url = streamUrl(url, { token: options.token });
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
      const { audio, language, volatile, words, channel, start } = this.options;
      const message = { type: 'start', audio, volatile, words, ...(start || {}) };
      if (language) message.language = language;
      if (channel) message.channel = channel;
      socket.send(JSON.stringify(message));
    };
    socket.onmessage = (event) => this._onMessage(event.data);
    socket.onerror = () => {}; // always followed by onclose, which carries the code
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
    let bytes = data instanceof Float32Array ? floatToPcm(data, encoding) : toBytes(data, encoding);
    if (this._carry) {
      const joined = new Uint8Array(this._carry.length + bytes.length);
      joined.set(this._carry);
      joined.set(bytes, this._carry.length);
      bytes = joined;
      this._carry = null;
    }
    const frameBytes = (BYTES_PER_SAMPLE[encoding] || 2) * (this.options.audio.channels || 1);
    const whole = bytes.length - (bytes.length % frameBytes);
    if (whole < bytes.length) this._carry = bytes.slice(whole);
    const maxBytes = Math.max(frameBytes, this.options.maxFrameBytes - (this.options.maxFrameBytes % frameBytes));
    for (let offset = 0; offset < whole; offset += maxBytes) {
      const piece = bytes.slice(offset, Math.min(whole, offset + maxBytes)); // a copy we own
      this._send(piece.buffer);
    }
    this.sentSeconds += whole / frameBytes / this.options.audio.sampleRate;
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
      this._socket.send(item);
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
        this.session = event.session ?? null;
        this.readyMessage = event;
        if (this.state === 'connecting') this.state = this._endRequested || this._cancelRequested ? 'ending' : 'ready';
        for (const item of this._outbox) this._socket.send(item);
        this._outbox = [];
        this._outboxBytes = 0;
        this._ready.resolve(event);
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
    this._ended.reject(reason); // no effect if `ended` already resolved it
    this._cancelled.reject(reason);
    const result = { ...info, error };
    this._closed.resolve(result);
    this._emit('close', result);
    this._finishIterators(error);
  }
}

/**
 * A read-only viewer of a broadcast channel (`/v1/listen?channel=NAME`) that stays with the
 * channel: it reconnects with backoff when the connection drops, and does not deliver a
 * final twice when the backfill after a reconnect repeats finals it already delivered.
 */
export class StenoViewer extends EventOwner {
  constructor(url, channel, options = {}) {
    super();
    this.channel = channel;
    this.url = listenUrl(url, channel, { token: options.token });
    this.options = {
      reconnect: true, minDelay: 0.5, maxDelay: 30, jitter: 0.2, firstAttempts: 3, maxAttempts: Infinity,
      ...options,
    };
    this.state = 'new';
    this.joined = null; // the last `joined` message
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
    socket.onerror = () => {}; // always followed by onclose
    socket.onclose = (event) => {
      if (this._socket !== socket) return; // closed by close() or replaced
      this._socket = null;
      this._onSocketClose(event, opened);
    };
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
    } else if (event.type === 'final' && typeof event.end === 'number') {
      // Finals of one broadcast never overlap and their ends increase: one ending where an
      // earlier one did (or before) is the backfill repeating it.
      if (event.end <= this._lastFinalEnd + 0.0005) return;
      this._lastFinalEnd = event.end;
    }
    this._deliver(event);
  }

  _onSocketClose(event, opened) {
    const info = { code: event.code, reason: event.reason || '', wasClean: !!event.wasClean };
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

function toBytes(data, encoding) {
  if (data instanceof ArrayBuffer) return new Uint8Array(data);
  if (ArrayBuffer.isView(data)) return new Uint8Array(data.buffer, data.byteOffset, data.byteLength);
  if (typeof EncodedAudioChunk !== 'undefined' && data instanceof EncodedAudioChunk) {
    const bytes = new Uint8Array(data.byteLength);
    data.copyTo(bytes);
    return bytes;
  }
  throw new TypeError(`sendAudio: expected an ArrayBuffer, typed array or EncodedAudioChunk for ${encoding}`);
}

function floatToPcm(samples, encoding) {
  if (encoding === 'pcm_f32le') {
    const out = new Uint8Array(samples.length * 4);
    const view = new DataView(out.buffer);
    for (let i = 0; i < samples.length; i++) view.setFloat32(i * 4, samples[i], true);
    return out;
  }
  if (encoding !== 'pcm_s16le') throw new TypeError(`sendAudio: Float32Array samples cannot be sent as ${encoding}`);
  const out = new Uint8Array(samples.length * 2);
  const view = new DataView(out.buffer);
  for (let i = 0; i < samples.length; i++) {
    const s = Math.max(-1, Math.min(1, samples[i]));
    view.setInt16(i * 2, s < 0 ? Math.round(s * 0x8000) : Math.round(s * 0x7fff), true);
  }
  return out;
}
