/**
 * steno-client.js — the Steno live-captioning protocol (version 1) as one small ES module:
 * StenoClient publishes audio and receives its captions; StenoPublisher does so across dropped
 * connections, a full or restarting server; StenoViewer follows a broadcast channel.
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
 *            model     one of the server's models by name, e.g. 'en-us' (optional; see fetchModels:
 *                      without it the server's default, or the model serving `language`)
 *            volatile  ask for volatile results (default true)
 *            words     ask for word timings in results (default true)
 *            channel   publish to this broadcast channel (optional)
 *            phrases   words and phrases the session expects, e.g. ['John Dashwood', 'Kubernetes']
 *                      (optional; at most 1000 of at most 10 words: see parsePhrases)
 *            profanity what the results do with swear words and slurs: 'keep', 'mask' (f***) or
 *                      'remove' (optional; the server's default otherwise, itself 'mask' unless set)
 *            token     access token, added to the URL as ?token=
 *            start     extra fields merged into the `start` message (optional)
 *            resume    {session, resumeToken, after}: continue that session (its connection
 *                      dropped) instead of starting one: sends `resume`, and `resumed` is its
 *                      `ready` (the server first replays the events after seq `after`)
 *            continues {session, resumeToken} of a session lost for good, sent with `channel`:
 *                      the new session takes that one's channel over at once if it still holds it
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
 *   silence(seconds)   Declares silence left out instead of sent (see SilenceSuppressor): the
 *                      timeline advances by `seconds`, nothing is reported. Queued like audio
 *                      before `ready`; exact to the microsecond. Returns `sentSeconds`.
 *   gap(seconds)       Declares audio the client does not have (e.g. lost while disconnected):
 *                      the session's timeline advances by `seconds`. Resolves with the server's
 *                      `gap` message ({start, end}).
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
 *   readyMessage   the whole `ready` message (or `resumed`, for a resuming client; null before)
 *   ready          Promise of the `ready` message (same as start())
 *   closed         Promise that always resolves, with {code, reason, wasClean, error}
 *   error          the StenoError that ended the session, if any
 *   lag            received − analyzed from the last `progress`, in seconds (null before one)
 *   bufferedAmount bytes queued in the socket and not yet sent (backpressure), plus audio
 *                  waiting for `ready`
 *   sentSeconds    seconds of audio sent (PCM from byte counts, Opus from packet TOC bytes; a
 *                  packet with a malformed header counts as long as the last good one, as on
 *                  the server), with declared gaps; a resuming client starts at `received`
 *   lastSeq        `seq` of the last server event
 *
 * Errors
 *   StenoError extends Error with `code` (a protocol code such as 'unsupported_audio', or
 *   'connection_failed' / 'connection_lost' / 'closed' for transport problems, 'unauthorized' /
 *   'forbidden' for a refused token or origin, 'resume_failed' (close 4404) for a refused
 *   resume), `message`, `closeCode` (the WebSocket close
 *   code, when there was one), `status` (the HTTP status that explained a refusal) and `fatal`.
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
 *            probe         when it cannot get in before any `joined`, GET the listen address over
 *                          HTTP to learn why: a refused token or origin ends the viewer with the
 *                          error code 'unauthorized' / 'forbidden' (default true; fetch: the
 *                          fetch function, default globalThis.fetch)
 *            WebSocket     the WebSocket constructor to use
 *   start()          connects; resolves with the first `joined`, rejects (StenoError) if the
 *                    viewer ends before one. Idempotent.
 *   close()          stops following (no reconnect); `closed` resolves.
 *   reconnectNow()   while waiting to reconnect, connect at once.
 *   on/off/events()  as for StenoClient. Server events: 'joined', 'publisher' (the
 *                    broadcast's state: 'live', 'ended' or 'lost'; also `viewer.publisher`),
 *                    'final', 'volatile', 'speech', 'error' (non-fatal), 'event' (all); and
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
 * Publishing across dropped connections
 *
 *   const publisher = StenoClient.publish('https://captions.example.org', {
 *     audio: { encoding: 'opus', sampleRate: 48000, channels: 1 }, pcmFallback: true });
 *   publisher.on('state', (s) => showStatus(s.state, s.reason, s.delay, s.error));
 *   publisher.on('final', (e) => addLine(e.offset + e.start, e.offset + e.end, e.text));
 *   publisher.on('format', ({ audio }) => switchEncoderTo(audio));   // with pcmFallback
 *   publisher.sendAudio(packet);   // sent, or held while there is no session
 *   await publisher.end();
 *
 * new StenoPublisher(url, options) (or StenoClient.publish, which also starts it)
 *   options  audio, language, model, volatile, words, channel, phrases, profanity, token, start, WebSocket, maxFrameBytes
 *                          as for StenoClient (each new session is opened with them)
 *            bufferSeconds audio held while there is no session, the latest kept (default 60);
 *                          also the most sent audio kept for sending again after a drop
 *            resume        resume the session after a dropped connection while the server keeps
 *                          it (`ready.limits.resumeSeconds`), instead of starting a new one
 *                          (default true)
 *            pcmFallback   when the server refuses Opus (1003), go on in PCM s16le at the same
 *                          rate: a 'format' event says so, and from then on sendAudio takes PCM
 *                          (Float32Array samples or s16le bytes). Default false
 *            reconnect     reconnect at all (default true)
 *            minDelay, maxDelay, jitter   backoff after a drop: minDelay·2^n s up to maxDelay
 *                          (0.5, 30), ±jitter (0.2); at once after 4009 and a first 4008
 *            restartDelay  the longest wait between tries while the server restarts (5 s)
 *            firstAttempts reconnects to a server never reached before giving up (default 3)
 *            maxAttempts   reconnects in a row after a drop, once a session was ready (Infinity)
 *            probe         after a connection that never opened, GET the stream address over
 *                          HTTP to learn why (default true; see probeStream); fetch: the fetch
 *                          function to use (default globalThis.fetch)
 *   After a dropped connection (close 1006/1005: the server did not close the session) it
 *   resumes the session: `resume` with `session`, `resumeToken` and the last `seq` it got; the
 *   events the server replays come once each (one it already has is not delivered again);
 *   on `resumed` it sends the audio from `resumed.received` on — it keeps what it sent until a
 *   `progress.received` covers it, and what it was given meanwhile — declaring with `gap`
 *   first any audio it no longer has, so the session's timeline stays the publisher's. A
 *   finalize the server may not have got is sent again in its place. A refused resume
 *   (`resume_failed`, 4404), a resume whose handshake fails while the server answers (the
 *   instance that ran the session is gone behind a balancer, or drains), a session the server
 *   closed (1001, 4008, 4009, 1011…) or one kept too long gives a new session instead, which
 *   gets the audio after the old one's last final.
 *   Why it waits (state 'reconnecting', `reason`): 'full' (503 full: waits Retry-After, again
 *   and again, never giving up), 'restarting' (close 1001/1012 or 503 draining: waits until
 *   the server is back, however long), 'lost' (a drop: backoff, up to maxAttempts),
 *   'unreachable' (no answer at all: up to firstAttempts before any session, maxAttempts
 *   after), 'session_limit' (4009: at once). A refused token (401) or origin (403) closes it
 *   with error code 'unauthorized' / 'forbidden' and no retry; so do closes that would repeat
 *   (1003, 1009, 4400) and a normal close it did not ask for.
 *   start()          connects; resolves with the first `ready`. Idempotent; sendAudio starts it too.
 *   sendAudio(data)  as StenoClient.sendAudio; held (a copy) while no session is ready. Returns
 *                    `timeline`.
 *   silence(seconds) silence left out, declared in its place among the audio (held, sent again
 *                    after a drop, like audio, but counting for nothing in bufferSeconds and
 *                    bufferedSeconds; consecutive held ones are one). Returns `timeline`.
 *   finalize(through?)  resolves with `finalized` (+ offset), or null with nothing to finalize;
 *                    while away it is held with the audio and sent after it. `through` is on the
 *                    publisher's timeline.
 *   pause()          no audio for a while (a microphone turned off): after a drop, or the
 *                    server's idle close, wait in state 'idle' for the next audio instead of
 *                    reconnecting (unless audio is held).
 *   end() / cancel() finish; resolve with `ended` / `cancelled`, or null when there was no
 *                    session to finish (waiting to reconnect: what was held is given up).
 *   close()          stops at once. reconnectNow() skips the wait.
 *   Events: every server event of its sessions, as StenoClient's, each with `offset` added: the
 *     publisher-timeline time where that session's audio starts (times in a session start at
 *     0 again; add `offset` for one continuous timeline). `resumed` (a session continued on a
 *     new connection) also carries `lost` (seconds declared as a gap: 0 when nothing was lost)
 *     and `resent` (seconds sent again); a `ready` after a refused resume carries
 *     `resumeFailed: true`. And
 *     'state'   {state, previous, attempt, reason, delay?, retryAt?, retryAfter?, status?, code?,
 *               error?, resuming? (connecting), resumed? (open)}: 'new' → 'connecting' → 'open'
 *               → 'reconnecting' → 'connecting' … → 'idle' → 'connecting' … → 'ending' → 'closed';
 *     'format'  {audio, previous, reason} the format changed (pcmFallback);
 *     'dropped' {seconds, total, reason} audio that will not be sent ('buffer_full',
 *               'format_changed', 'cancelled', 'ended_while_away', 'closed'), or that was sent
 *               and never arrived ('connection_lost', known when the session is resumed);
 *     'close'   {code, reason, wasClean, error} once, at the end.
 *   Properties: state, audio (the current format), url, client (the current StenoClient),
 *   session, sessions, resumes, timeline, offset, bufferedSeconds, bufferedAmount, droppedSeconds,
 *   reason, reconnectDelay, retryAt, attempt, lag, lastSeq, error, ready, closed.
 *
 * Helpers
 *   streamUrl(base, {token, path})  the WebSocket URL the client would use
 *   probeUrl(wsUrl)                 the same address over http(s)
 *   probeStream(wsUrl, {fetch})     why a WebSocket would be refused: {reason: 'unauthorized' |
 *                                   'forbidden' | 'full' | 'draining' | 'accepting' | 'unknown' |
 *                                   'unreachable', status, retryAfter}
 *   listenUrl(base, channel, {token})            a viewer's WebSocket URL
 *   captionsUrl(base, channel, 'vtt'|'srt'|'txt', {token})  the channel's captions over HTTP
 *   modelsUrl(base, {token})        the server's /v1/models over HTTP
 *   fetchModels(base, {token, fetch, timeout})  → Promise of the server's models ([{name,
 *                                   language, engine, default, …}], the default first), [] when
 *                                   they cannot be had: what `model` may name
 *   isChannelName(name)             1–64 letters, digits, '-', '_', '.' (not '.' or '..')
 *   shouldReconnect(closeCode)      whether reconnecting after this close code makes sense
 *   viewerShouldReconnect(closeCode)  the same for a viewer (only 1000 and protocol or
 *                                   policy closes end a viewer)
 *   describeError(code)             a plain-language sentence for a protocol or close code
 *   parsePhrases(text)              {phrases, problem}: one phrase per line, as the settings take them
 *   opusPacketSamples(bytes)        samples at 48 kHz in one Opus packet (RFC 6716 TOC), 0 when
 *                                   malformed or longer than 120 ms (as the server reads it)
 *   new SilenceSuppressor(rate)     which samples to send and which silence to declare instead:
 *                                   StenoAudio's SilenceSuppressor, ported (see the class)
 *   new SilenceGate(rate)           its verdicts put on the sender's own pieces (PCM chunks,
 *                                   Opus packets), as `steno send` does: what the page uses
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
  RESUME_FAILED: 4404,
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
  [4404, 'resume_failed'],
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
  resume_failed: 'The server could no longer continue the session after the connection dropped.',
  connection_failed: 'Could not connect to the captioning server.',
  unauthorized: 'The captioning server refused the access token.',
  forbidden: 'The captioning server does not accept connections from this page (its origin is not allowed).',
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
 * a slow link (4008), the maximum session length (4009: carry on in a new session) and a
 * session that could not be resumed (4404: start a new one). Never: a normal close (1000),
 * or codes that would only repeat (1003 unsupported audio, 1009 too large, 4400 protocol
 * misuse) or mean nobody is sending (4010 idle).
 */
export function shouldReconnect(closeCode) {
  switch (closeCode) {
    case 1001: case 1005: case 1006: case 1011: case 1012: case 1013: case 1014:
    case 4008: case 4009: case 4404:
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

/** The most phrases a `start` may carry, and words in one (the server's bounds). */
export const MAX_PHRASES = 1000;
export const MAX_PHRASE_WORDS = 10;

/**
 * Phrases from text with one per line (as `steno transcribe --phrases FILE` reads them):
 * lines trimmed, blank lines and lines starting with # skipped. Returns {phrases, problem}:
 * `problem` is a sentence when the list is over the server's bounds (more than MAX_PHRASES,
 * or a phrase of more than MAX_PHRASE_WORDS words), else null.
 */
export function parsePhrases(text) {
  const phrases = String(text ?? '').split(/\r?\n/).map((line) => line.trim())
    .filter((line) => line && !line.startsWith('#'));
  let problem = null;
  if (phrases.length > MAX_PHRASES) {
    problem = `${phrases.length} phrases; at most ${MAX_PHRASES} are allowed`;
  } else {
    const long = phrases.find((phrase) => phrase.split(/\s+/).length > MAX_PHRASE_WORDS);
    if (long) problem = `"${long.slice(0, 40)}" has more than ${MAX_PHRASE_WORDS} words`;
  }
  return { phrases, problem };
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

/** The HTTP address of the server's models (`/v1/models`). */
export function modelsUrl(base, { token } = {}) {
  const url = serverUrl(base, 'http');
  url.pathname = `${routePrefix(url.pathname)}/v1/models`;
  if (token != null && token !== '') url.searchParams.set('token', token);
  return url.toString();
}

/**
 * The server's models, as `/v1/models` lists them (each {name, language, engine, default, …}),
 * the default first; [] when the server cannot be asked (no fetch, unreachable, refused, not
 * JSON): a client then leaves `model` to the server.
 */
export async function fetchModels(base, { token, fetch = globalThis.fetch, timeout = 10 } = {}) {
  if (typeof fetch !== 'function') return [];
  try {
    return await withTimeout(timeout, async (signal) => {
      const response = await fetch(modelsUrl(base, { token }), { signal });
      if (!response.ok) return [];
      const body = await response.json();
      const models = Array.isArray(body?.models) ? body.models : [];
      const named = models.filter((m) => m && typeof m.name === 'string' && m.name);
      return [...named.filter((m) => m.default === true), ...named.filter((m) => m.default !== true)];
    });
  } catch {
    return [];
  }
}

/** `request(signal)`, its signal aborted after `timeout` seconds (where the runtime has AbortController). */
async function withTimeout(timeout, request) {
  const abort = typeof AbortController === 'function' ? new AbortController() : null;
  const timer = abort ? setTimeout(() => abort.abort(), timeout * 1000) : null;
  try {
    return await request(abort?.signal);
  } finally {
    if (timer) clearTimeout(timer);
  }
}

/**
 * The plain HTTP address that tells why a WebSocket to `wsUrl` would be refused: the same
 * path and query (the token too) over http(s). Browsers cannot read the HTTP status of a
 * refused WebSocket handshake; the server answers this GET with what the handshake would get.
 */
export function probeUrl(wsUrl) {
  const url = new URL(String(wsUrl), globalThis.location?.href);
  if (url.protocol === 'ws:') url.protocol = 'http:';
  else if (url.protocol === 'wss:') url.protocol = 'https:';
  url.hash = '';
  return url.toString();
}

/**
 * Asks the server why a WebSocket to `wsUrl` failed: a plain `GET` of the same address.
 * Resolves (never rejects) with {reason, status, retryAfter}: reason is
 *   'unauthorized' (401: missing or wrong token), 'forbidden' (403: origin not allowed),
 *   'full' (503 with {"status":"full"}), 'draining' (503 with {"status":"draining"}: shutting
 *   down or restarting), 'accepting' (426: a WebSocket would be accepted now),
 *   'unknown' (any other answer, e.g. a server without this check) or
 *   'unreachable' (no answer: down, wrong address, blocked, or no fetch in this runtime);
 * retryAfter is the server's Retry-After in seconds (JSON `retryAfter`, else the header), or null.
 */
export async function probeStream(wsUrl, { fetch = globalThis.fetch, timeout = 10 } = {}) {
  if (typeof fetch !== 'function') return { reason: 'unreachable', status: null, retryAfter: null };
  try {
    return await withTimeout(timeout, async (signal) => {
      const response = await fetch(probeUrl(wsUrl), { cache: 'no-store', redirect: 'manual', signal });
      let body = null;
      try {
        body = await response.json();
      } catch {
        body = null; // not JSON: only the status counts
      }
      const seconds = (value) => {
        const n = Number(value);
        return value !== null && value !== '' && Number.isFinite(n) && n >= 0 ? n : null;
      };
      const retryAfter = seconds(body?.retryAfter) ?? seconds(response.headers?.get?.('retry-after') ?? null);
      let reason = 'unknown';
      if (response.status === 401) reason = 'unauthorized';
      else if (response.status === 403) reason = 'forbidden';
      else if (response.status === 426) reason = 'accepting';
      else if (response.status === 503) reason = body?.status === 'draining' ? 'draining' : 'full';
      return { reason, status: response.status, retryAfter };
    });
  } catch {
    return { reason: 'unreachable', status: null, retryAfter: null };
  }
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
  constructor(code, message, { closeCode = null, fatal = true, status = null } = {}) {
    super(message || describeError(code));
    this.name = 'StenoError';
    this.code = code;
    this.closeCode = closeCode;
    this.fatal = fatal;
    this.status = status; // the HTTP status that explained a refused connection, if asked
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

/**
 * What a client streams when it leaves out silence: audio to send, or a stretch of silence to
 * declare instead (`silence`), so that the server's timeline stays that of the whole input
 * while a quiet client sends (almost) nothing. A port of `SilenceSuppressor` in StenoAudio
 * (Sources/StenoAudio/SilenceSuppressor.swift), with its rules and defaults:
 *
 * It keeps sending through pauses shorter than `hangover` plus `preroll` (the recognizer needs
 * ≈0.5 s of silence to end an utterance, and hears that silence as it would without
 * suppression), and before speech resumes it sends the last `preroll` of the silence again
 * (the recognizer's detector keeps 0.2 s from before speech starts, and a word's onset is
 * quiet). Loudness is judged per 10 ms frame against a noise floor it tracks itself (the
 * quietest recent frames), so it needs no setting for the microphone's level. What it leaves
 * out it declares as it goes: the first `declareAfter` of a pause at once (so the server knows
 * the pause is meant), then every `declareEvery` (a long pause does not look idle).
 *
 *   const suppressor = new SilenceSuppressor(48000);
 *   for (const out of suppressor.push(samples)) {       // Float32Array, any chunking
 *     if (out.type === 'audio') send(out.samples); else publisher.silence(out.seconds);
 *   }
 *   … suppressor.finish() at the end of the input (what is held goes out).
 */
export class SilenceSuppressor {
  constructor(sampleRate, { hangover = 0.8, preroll = 0.5, margin = 10, absoluteQuiet = -65,
    declareAfter = 0.1, declareEvery = 5 } = {}) {
    this.sampleRate = Math.max(1, Math.floor(sampleRate));
    Object.assign(this, { hangover, preroll, margin, absoluteQuiet, declareAfter, declareEvery });
    this._frameSamples = Math.max(1, Math.floor(this.sampleRate / 100));
    this._frame = new Float32Array(this._frameSamples);
    this._filled = 0;
    this._floor = null;
    this._quietFrames = 0; // quiet frames since the last loud one
    this._suppressing = false;
    this._held = []; // while suppressing: the last `preroll` of quiet frames
    this._skippedFrames = 0; // frames left out and not yet declared
    this._declaredInPause = false;
  }

  /** Whether it is leaving silence out now. */
  get isSuppressing() {
    return this._suppressing;
  }

  /** Takes samples; returns what to send or declare, in order: {type: 'audio', samples} or {type: 'silence', seconds}. */
  push(samples) {
    const out = [];
    const sending = [];
    for (let i = 0; i < samples.length; i++) {
      this._frame[this._filled++] = samples[i];
      if (this._filled === this._frameSamples) {
        this._take(this._frame.slice(), sending, out);
        this._filled = 0;
      }
    }
    if (sending.length) out.push({ type: 'audio', samples: concatFloats(sending) });
    return out;
  }

  /** End of input: what is held goes out (as silence while suppressing). */
  finish() {
    const out = [];
    if (this._suppressing) {
      const frames = this._skippedFrames + this._held.length;
      this._held = [];
      this._skippedFrames = 0;
      if (frames > 0) out.push({ type: 'silence', seconds: this._seconds(frames) });
      if (this._filled > 0) out.push({ type: 'silence', seconds: this._filled / this.sampleRate });
    } else if (this._filled > 0) {
      out.push({ type: 'audio', samples: this._frame.slice(0, this._filled) });
    }
    this._filled = 0;
    return out;
  }

  _take(frame, sending, out) {
    if (this._isLoud(frame)) {
      this._quietFrames = 0;
      if (this._suppressing) {
        // Speech again: declare what was left out, send the pre-roll, go on sending.
        this._suppressing = false;
        this._declaredInPause = false;
        if (this._skippedFrames > 0) out.push({ type: 'silence', seconds: this._seconds(this._skippedFrames) });
        this._skippedFrames = 0;
        sending.length = 0;
        sending.push(...this._held);
        this._held = [];
      }
      sending.push(frame);
      return;
    }
    this._quietFrames += 1;
    if (!this._suppressing && this._quietFrames * 0.01 > this.hangover + this.preroll) {
      this._suppressing = true;
      if (sending.length) {
        out.push({ type: 'audio', samples: concatFloats(sending) });
        sending.length = 0;
      }
    }
    if (!this._suppressing) {
      sending.push(frame);
      return;
    }
    this._held.push(frame);
    const keep = Math.round(this.preroll * 100);
    if (this._held.length > keep) {
      this._held.splice(0, this._held.length - keep);
      this._skippedFrames += 1;
      // Declared as it goes: soon after the pause begins, then now and then.
      const due = Math.max(1, Math.round((this._declaredInPause ? this.declareEvery : this.declareAfter) * 100));
      if (this._skippedFrames >= due) {
        out.push({ type: 'silence', seconds: this._seconds(this._skippedFrames) });
        this._skippedFrames = 0;
        this._declaredInPause = true;
      }
    }
  }

  _isLoud(frame) {
    let energy = 0;
    for (let i = 0; i < frame.length; i++) energy += frame[i] * frame[i];
    const rms = Math.sqrt(energy / frame.length);
    const level = rms > 0 ? 20 * Math.log10(rms) : -200;
    // The floor follows the quietest frames down at once and rises slowly (5 dB/s).
    const current = this._floor ?? level;
    this._floor = level < current ? level : current + 0.05;
    return level >= this.absoluteQuiet && level >= this._floor + this.margin;
  }

  _seconds(frames) {
    return (frames * this._frameSamples) / this.sampleRate;
  }
}

/**
 * SilenceSuppressor's verdicts put on a sender's own pieces of audio (PCM chunks, Opus
 * packets), as `steno send` does (Sources/steno/Client/SilenceGate.swift): a piece that holds
 * any audio is sent whole, a piece that is all silence is left out, and a run of pieces left
 * out is declared as one silence of exactly their length. Pieces wait until the suppressor has
 * judged all of their samples. Positions and lengths are in samples of one channel.
 *
 *   gate.judge(samples)                       the captured samples, in order (mono)
 *   gate.piece(payload, start, length)        a piece to send for samples [start, start+length)
 *   gate.finish()                             end of input: everything is released
 * Each returns what to do now, in order: {send: payload, start, length} or {silence: true, start, length}.
 */
export class SilenceGate {
  constructor(sampleRate, options = {}) {
    this.sampleRate = sampleRate;
    this._suppressor = new SilenceSuppressor(sampleRate, options);
    this._waiting = [];
    this._audio = []; // judged spans of audio [from, to) not yet behind every piece
    this._judged = 0;
    this._silence = null; // {start, length}: pieces left out, not yet declared
  }

  judge(samples) {
    this._apply(this._suppressor.push(samples));
    return this._release(false);
  }

  piece(payload, start, length) {
    this._waiting.push({ payload, start, length });
    return this._release(false);
  }

  finish() {
    this._apply(this._suppressor.finish());
    return this._release(true);
  }

  _apply(outputs) {
    for (const output of outputs) {
      if (output.type === 'audio') {
        const from = this._judged;
        this._judged += output.samples.length;
        const last = this._audio.at(-1);
        if (last && last.to === from) last.to = this._judged;
        else this._audio.push({ from, to: this._judged });
      } else {
        this._judged += Math.round(output.seconds * this.sampleRate);
      }
    }
  }

  _release(all) {
    const out = [];
    while (this._waiting.length && (all || this._waiting[0].start + this._waiting[0].length <= this._judged)) {
      const piece = this._waiting.shift();
      const end = piece.start + piece.length;
      while (this._audio.length && this._audio[0].to <= piece.start) this._audio.shift();
      const audio = piece.length === 0 || this._audio.some((span) => span.from < end && span.to > piece.start);
      if (audio) {
        this._declare(out);
        out.push({ send: piece.payload, start: piece.start, length: piece.length });
      } else if (this._silence) {
        this._silence.length = end - this._silence.start;
      } else {
        this._silence = { start: piece.start, length: piece.length };
      }
    }
    // What was left out is declared as soon as it is known to be silence.
    this._declare(out);
    return out;
  }

  _declare(out) {
    if (!this._silence) return;
    out.push({ silence: true, start: this._silence.start, length: this._silence.length });
    this._silence = null;
  }
}

function concatFloats(frames) {
  const out = new Float32Array(frames.reduce((n, f) => n + f.length, 0));
  let offset = 0;
  for (const f of frames) {
    out.set(f, offset);
    offset += f.length;
  }
  return out;
}

/** Seconds of audio a held or sent item carries: declared silence carries none. */
function audioSeconds(item) {
  return item.silence ? 0 : item.seconds;
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
