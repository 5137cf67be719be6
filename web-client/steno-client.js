/**
 * steno-client.js — the Steno live-captioning protocol (version 1) as one small ES module:
 * StenoClient publishes audio and receives its captions; StenoPublisher does so across dropped
 * connections, a full or restarting server; StenoViewer follows a broadcast channel.
 *
 * This file is what to import, and the documentation; the code is in steno-client/, a file a
 * part: protocol.js (close codes, errors, phrases, channel names), addresses.js (the server's
 * addresses and HTTP answers), audio-data.js (Opus packet lengths, PCM), events.js (what the
 * classes share), client.js (StenoClient), viewer-client.js (StenoViewer), publisher.js with
 * publisher-audio.js and publisher-reconnect.js (StenoPublisher), silence.js
 * (SilenceSuppressor, SilenceGate).
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
 *            listen address; the viewer connects to <prefix>/v1/listen?channel=NAME[&token=T][&language=L].
 *   options  token         access token, added as ?token=
 *            language      the captions' language to follow: a tag the broadcast carries or
 *                          'original' (default: the publisher's own; one not carried gets a
 *                          non-fatal 'bad_message' error, then the publisher's own)
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
 *   listenUrl(base, channel, {token, language})  a viewer's WebSocket URL
 *   captionsUrl(base, channel, 'vtt'|'srt'|'txt', {token, language})  the channel's captions over HTTP
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

export {
  CloseCode, DEFAULT_LISTEN_PATH, DEFAULT_STREAM_PATH, MAX_PHRASES, MAX_PHRASE_WORDS, PROTOCOL_VERSION,
  StenoError, describeError, isChannelName, parsePhrases, shouldReconnect, viewerShouldReconnect,
} from './steno-client/protocol.js';
export {
  captionsUrl, fetchModels, listenUrl, modelsUrl, probeStream, probeUrl, streamUrl,
} from './steno-client/addresses.js';
export { OPUS_MAX_PACKET_SAMPLES, opusPacketSamples } from './steno-client/audio-data.js';
export { StenoClient } from './steno-client/client.js';
export { StenoViewer } from './steno-client/viewer-client.js';
export { StenoPublisher } from './steno-client/publisher.js';
export { SilenceGate, SilenceSuppressor } from './steno-client/silence.js';
