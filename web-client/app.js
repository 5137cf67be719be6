// The Steno page: microphone → session → captions. Protocol details live in steno-client.js,
// capture and encoding in audio.js, caption files in transcript.js.

import { StenoClient, describeError, isChannelName, shouldReconnect, streamUrl } from './steno-client.js';
import { MicrophoneCapture, describeMicrophoneError } from './audio.js';
import { followNewText } from './scroll.js';
import { shortTime, toSRT, toText, toWebVTT } from './transcript.js';

const $ = (id) => document.getElementById(id);
const ui = {
  start: $('start'), stop: $('stop'), finalize: $('finalize'), end: $('end'), cancel: $('cancel'),
  status: $('status'), speech: $('speech'), error: $('error'),
  level: $('level'), levelFill: document.querySelector('#level .level-fill'),
  format: $('format'), audioTime: $('audio-time'), lag: $('lag'), buffered: $('buffered'),
  transcript: $('transcript'), finals: $('finals'), volatile: $('volatile'), jump: $('jump'),
  downloadTxt: $('download-txt'), downloadVtt: $('download-vtt'), downloadSrt: $('download-srt'), clear: $('clear'),
  server: $('server-url'), encoding: $('encoding'), language: $('language'), channel: $('channel'),
  share: $('share'), shareChannel: $('share-channel'), viewerLink: $('viewer-link'), copyViewerLink: $('copy-viewer-link'),
};

const PARAGRAPH_GAP = 2.0; // seconds of silence between finals that start a new paragraph
const MAX_PENDING_SECONDS = 30; // audio kept while reconnecting
const FIRST_CONNECT_ATTEMPTS = 3; // a server never reached is probably wrong, not down
const RECONNECT_ATTEMPTS = 10;

// ---- settings from the page address -------------------------------------------------------

const params = new URLSearchParams(location.search);
const token = params.get('token') || '';
const defaultServer = location.host
  ? `${location.protocol === 'https:' ? 'wss:' : 'ws:'}//${location.host}/v1/stream`
  : '';
ui.server.value = params.get('server') || defaultServer;
ui.encoding.value = ['auto', 'opus', 'pcm'].includes(params.get('encoding')) ? params.get('encoding') : 'auto';
ui.language.value = params.get('language') || 'en-US';
ui.channel.value = params.get('channel') || '';

// ---- state ------------------------------------------------------------------------------------

let capture = null; // MicrophoneCapture while the microphone is on
let captureBase = 0; // transcript-clock time at which the current capture started
let clock = 0; // seconds of audio captured for this transcript (the transcript's timeline)
let client = null; // the StenoClient of the current session
let sessionBase = null; // transcript-clock time of the current session's first sample
let pending = []; // captured chunks waiting for a session: {data, seconds, t0}
let intent = null; // 'ending' | 'cancelling' while the user's End/Cancel is in flight
let reconnect = { attempts: 0, timer: null, everReady: false };
let formatInUse = null; // the format the current session was started with
let pcmFallback = false; // the server refused Opus once: use PCM from now on
let sessionNumber = 0; // counts sessions, so that each starts a new paragraph
const finals = []; // {start, end, text, words} on the transcript clock
let volatileResult = null;
const followIfStuck = followNewText(ui.transcript, ui.jump); // until the reader scrolls up

// ---- status and notices ---------------------------------------------------------------------

function setStatus(state, text) {
  ui.status.dataset.state = state;
  ui.status.textContent = text;
  if (state !== 'listening') ui.speech.hidden = true;
  updateButtons();
}

function showNotice(text, kind = 'error') {
  ui.error.textContent = text;
  ui.error.dataset.kind = kind;
  ui.error.hidden = false;
}

/** A sentence for people about why a session ended, with the server's own words as detail. */
function plainError(error, closeCode) {
  const sentence = describeError(error?.code || closeCode);
  const detail = error?.message && error.message !== sentence ? error.message : '';
  return detail && error?.code !== 'connection_failed' ? `${sentence} (${detail})` : sentence;
}

function clearNotice() {
  ui.error.hidden = true;
  ui.error.textContent = '';
}

function updateButtons() {
  const sessionOpen = !!client && client.state !== 'closed';
  const busy = intent !== null;
  const reconnecting = reconnect.timer !== null;
  ui.start.disabled = !!capture || busy;
  ui.stop.disabled = !capture;
  ui.finalize.disabled = busy || !client || client.state !== 'ready';
  ui.end.disabled = busy || !(capture || sessionOpen || reconnecting);
  ui.cancel.disabled = busy || !(capture || sessionOpen || reconnecting);
  const empty = finals.length === 0;
  ui.downloadTxt.disabled = empty;
  ui.downloadVtt.disabled = empty;
  ui.downloadSrt.disabled = empty;
  ui.clear.disabled = empty && !volatileResult;
}

function formatBytes(n) {
  if (n < 1024) return `${n} B`;
  if (n < 1024 * 1024) return `${(n / 1024).toFixed(1)} KB`;
  return `${(n / 1024 / 1024).toFixed(1)} MB`;
}

function refreshMeters() {
  const pendingBytes = pending.reduce((n, c) => n + c.data.byteLength, 0);
  const buffered = (client && client.state !== 'closed' ? client.bufferedAmount : 0) + pendingBytes;
  ui.buffered.textContent = formatBytes(buffered);
  ui.buffered.dataset.bytes = String(buffered);
  ui.buffered.classList.toggle('warn', buffered > 64 * 1024);
  const seconds = capture ? captureBase + capture.capturedSeconds : clock;
  ui.audioTime.textContent = `${seconds.toFixed(1)} s`;
  ui.audioTime.dataset.seconds = seconds.toFixed(3);
}
setInterval(refreshMeters, 250);

// Level meter: peaks arrive every 20 ms; draw at most once a frame, falling back smoothly.
let levelPeak = 0;
let levelShown = 0;
let levelFrame = 0;
function onLevel(peak) {
  levelPeak = Math.max(levelPeak, peak);
  if (!levelFrame) levelFrame = requestAnimationFrame(drawLevel);
}
function drawLevel() {
  levelFrame = 0;
  const db = levelPeak > 0 ? 20 * Math.log10(levelPeak) : -100;
  const target = Math.min(1, Math.max(0, (db + 60) / 60)); // −60 dBFS … 0 dBFS
  levelShown = Math.max(target, levelShown * 0.85);
  levelPeak = 0;
  ui.levelFill.style.transform = `scaleX(${levelShown.toFixed(3)})`;
  const percent = Math.round(levelShown * 100);
  ui.level.setAttribute('aria-valuenow', String(percent));
  ui.level.setAttribute('aria-valuetext', percent < 5 ? 'silent' : `${percent} percent`);
}
function resetLevel() {
  levelPeak = 0;
  levelShown = 0;
  ui.levelFill.style.transform = 'scaleX(0)';
  ui.level.setAttribute('aria-valuenow', '0');
  ui.level.setAttribute('aria-valuetext', 'silent');
}

// ---- captions -------------------------------------------------------------------------------

function setVolatile(result) {
  volatileResult = result && result.text ? result : null;
  ui.volatile.textContent = volatileResult ? volatileResult.text : '';
  ui.transcript.classList.toggle('has-text', finals.length > 0 || !!volatileResult);
  updateButtons();
  followIfStuck();
}

function addFinal(event) {
  const text = (event.text || '').trim();
  const base = sessionBase ?? 0;
  const final = {
    start: base + event.start,
    end: base + event.end,
    text,
    session: sessionNumber,
    words: Array.isArray(event.words)
      ? event.words.map((w) => ({ ...w, start: base + w.start, end: base + w.end }))
      : undefined,
  };
  // A final supersedes the volatile result over its range.
  if (volatileResult && volatileResult.start < event.end) setVolatile(null);
  if (!text) return;
  const previous = finals[finals.length - 1];
  finals.push(final);
  const span = document.createElement('span');
  span.className = 'final';
  if (previous && (final.start - previous.end >= PARAGRAPH_GAP || final.session !== previous.session)) {
    span.classList.add('paragraph');
  }
  span.textContent = `${text} `;
  span.title = `${shortTime(final.start)} – ${shortTime(final.end)}`;
  span.dataset.start = final.start.toFixed(3);
  span.dataset.end = final.end.toFixed(3);
  ui.finals.append(span);
  ui.transcript.classList.add('has-text');
  updateButtons();
  followIfStuck();
}

// ---- audio ----------------------------------------------------------------------------------

function onChunk(chunk) {
  if (intent === 'cancelling') return;
  const item = { data: chunk.data, seconds: chunk.seconds, t0: captureBase + chunk.t0 };
  clock = Math.max(clock, item.t0 + item.seconds);
  if (client && client.state === 'ready') {
    sendChunk(item);
  } else {
    pending.push(item);
    // While reconnecting, keep only the most recent audio.
    let held = pending.reduce((n, c) => n + c.seconds, 0);
    while (held > MAX_PENDING_SECONDS && pending.length > 1) held -= pending.shift().seconds;
  }
}

function sendChunk(item) {
  if (sessionBase === null) sessionBase = item.t0;
  client.sendAudio(item.data);
}

function flushPending() {
  const items = pending;
  pending = [];
  for (const item of items) sendChunk(item);
}

function requestedEncoding() {
  return pcmFallback ? 'pcm' : ui.encoding.value;
}

async function startMicrophone() {
  const mic = new MicrophoneCapture({
    encoding: requestedEncoding(),
    pcmReason: pcmFallback ? 'the server does not accept Opus' : 'forced in settings',
    onChunk,
    onLevel,
    onEnded: () => {
      showNotice('The microphone was disconnected.');
      stopMicrophone({ finalize: true });
    },
    onError: (message) => {
      showNotice(message);
      stopMicrophone({ finalize: true });
    },
  });
  const format = await mic.start();
  capture = mic;
  captureBase = clock;
  ui.format.textContent = format.reason ? `${format.label} — ${format.reason}` : format.label;
  ui.format.dataset.encoding = format.encoding;
  ui.format.dataset.sampleRate = String(format.sampleRate);
  return format;
}

async function stopMicrophone({ finalize }) {
  const mic = capture;
  if (!mic) return;
  capture = null;
  updateButtons();
  await mic.stop(); // delivers the last audio through onChunk
  clock = Math.max(clock, captureBase + mic.capturedSeconds);
  resetLevel();
  refreshMeters();
  if (!finalize || intent) return;
  if (client && client.state === 'ready') {
    delete ui.status.dataset.finalized;
    setStatus('paused', 'Microphone off — finalizing…');
    client.finalize().catch(() => {});
  } else if (reconnect.timer !== null || (client && client.state !== 'closed')) {
    // Nothing more to say: drop the session that was still being (re)opened.
    giveUpSession();
    setStatus('idle', 'Microphone off');
  }
}

// ---- sessions -------------------------------------------------------------------------------

function sameFormat(a, b) {
  return a && b && a.encoding === b.encoding && a.sampleRate === b.sampleRate && a.channels === b.channels;
}

function openSession() {
  clearTimeout(reconnect.timer);
  reconnect.timer = null;
  const server = ui.server.value.trim();
  let url;
  try {
    url = streamUrl(server, { token });
  } catch {
    fail('Enter the server address (ws://… or wss://…) in Settings.');
    return;
  }
  const format = capture.format;
  formatInUse = format;
  sessionBase = null;
  sessionNumber += 1;
  const session = new StenoClient(url, {
    audio: { encoding: format.encoding, sampleRate: format.sampleRate, channels: format.channels },
    language: ui.language.value.trim() || undefined,
    channel: ui.channel.value.trim() || undefined,
    volatile: true,
    words: true,
  });
  client = session;
  const current = (fn) => (event) => { if (client === session) fn(event); };

  session.on('ready', current(() => {
    reconnect.attempts = 0;
    reconnect.everReady = true;
    if (!ui.error.hidden && ui.error.dataset.kind === 'warning') clearNotice();
    flushPending();
    if (intent) return; // End or Cancel was pressed while connecting
    setStatus(capture ? 'listening' : 'paused', capture ? 'Listening' : 'Microphone off');
  }));
  session.on('volatile', current((event) => setVolatile(event)));
  session.on('final', current((event) => addFinal(event)));
  session.on('speech', current((event) => { ui.speech.hidden = event.state !== 'started' || !capture; }));
  session.on('progress', current(() => {
    ui.lag.textContent = session.lag == null ? '—' : `${session.lag.toFixed(1)} s`;
    ui.lag.classList.toggle('warn', session.lag > 3);
  }));
  session.on('error', current((event) => {
    if (event.fatal) return;
    // The server's own words say more than the generic sentence (e.g. a channel that already
    // has a publisher, which leaves this session unpublished).
    const said = event.code === 'bad_message' && event.message ? event.message : '';
    showNotice(said ? `${said[0].toUpperCase()}${said.slice(1)}.` : describeError(event.code), 'warning');
  }));
  session.on('finalized', current((event) => {
    setVolatile(null);
    const through = (sessionBase ?? clock) + event.through;
    ui.status.dataset.finalized = through.toFixed(3);
    if (intent) return;
    if (capture) setStatus('listening', `Listening · finalized through ${shortTime(through)}`);
    else setStatus('paused', `Microphone off · finalized through ${shortTime(through)}`);
  }));
  session.on('ended', current((event) => {
    setVolatile(null);
    ui.status.dataset.ended = String(event.duration);
    setStatus('ended', `Ended · captioned through ${shortTime((sessionBase ?? 0) + Number(event.duration))}`);
  }));
  session.on('cancelled', current(() => {
    setVolatile(null);
    setStatus('cancelled', 'Cancelled');
  }));
  session.on('close', current((info) => onSessionClosed(session, info)));

  setStatus(reconnect.attempts ? 'reconnecting' : 'connecting', reconnect.attempts ? 'Reconnecting…' : 'Connecting…');
  session.start().catch(() => {}); // failures arrive as the 'close' event
}

function onSessionClosed(session, { code, error }) {
  client = null;
  ui.lag.textContent = '—';
  ui.lag.classList.remove('warn');
  ui.speech.hidden = true;
  if (intent === 'ending' || intent === 'cancelling') {
    const was = intent;
    intent = null;
    pending = [];
    if (error && !(was === 'ending' && ui.status.dataset.state === 'ended')) {
      showNotice(plainError(error, code));
      setStatus('error', was === 'ending' ? 'Ended with an error' : 'Cancelled with an error');
    } else if (ui.status.dataset.state !== 'ended' && ui.status.dataset.state !== 'cancelled') {
      setStatus(was === 'ending' ? 'ended' : 'cancelled', was === 'ending' ? 'Ended' : 'Cancelled');
    }
    updateButtons();
    return;
  }
  if (volatileResult) setVolatile(null); // it may never become final as it is

  if (!capture) {
    // The microphone is off: nothing to reconnect for.
    if (code === 4010) setStatus('idle', 'Session closed after a pause');
    else if (error) { showNotice(plainError(error, code)); setStatus('idle', 'Disconnected'); }
    else setStatus('idle', 'Ready');
    return;
  }

  // The server cannot take Opus: carry on in PCM, once.
  if (code === 1003 && formatInUse?.encoding === 'opus' && ui.encoding.value === 'auto' && !pcmFallback) {
    pcmFallback = true;
    showNotice('The server does not accept Opus audio; sending uncompressed audio instead.', 'warning');
    restartWithPcm();
    return;
  }

  const neverReached = error?.code === 'connection_failed';
  const retry = shouldReconnect(code) || neverReached;
  const limit = reconnect.everReady ? RECONNECT_ATTEMPTS : FIRST_CONNECT_ATTEMPTS;
  if (retry && reconnect.attempts < limit) {
    const attempt = reconnect.attempts++;
    const delay = code === 4009 ? 0 : Math.min(30, 0.5 * 2 ** attempt) * (0.8 + Math.random() * 0.4);
    const why = neverReached ? describeError('connection_failed') : describeError(code);
    showNotice(`${why} Reconnecting${delay >= 1 ? ` in ${Math.round(delay)} s` : ''}…`, 'warning');
    reconnect.timer = setTimeout(() => {
      reconnect.timer = null;
      if (capture) openSession();
    }, delay * 1000);
    setStatus('reconnecting', delay >= 1 ? `Reconnecting in ${Math.round(delay)} s` : 'Reconnecting…');
    return;
  }
  fail(neverReached
    ? `Could not connect to the captioning server at ${ui.server.value.trim()}. It may be down, full, or refusing the access token.`
    : plainError(error, code));
}

async function restartWithPcm() {
  await stopMicrophone({ finalize: false });
  pending = []; // Opus packets: the new session takes PCM
  try {
    await startMicrophone();
    openSession();
  } catch (error) {
    fail(describeMicrophoneError(error));
  }
}

function giveUpSession() {
  clearTimeout(reconnect.timer);
  reconnect.timer = null;
  pending = [];
  const session = client;
  client = null;
  if (session && session.state !== 'closed') session.close(1000, 'client stopped');
}

function fail(message) {
  giveUpSession();
  showNotice(message);
  setStatus('error', 'Stopped');
  stopMicrophone({ finalize: false });
}

// ---- buttons --------------------------------------------------------------------------------

ui.start.addEventListener('click', async () => {
  if (capture || intent) return;
  clearNotice();
  ui.start.disabled = true;
  setStatus('starting', 'Starting microphone…');
  let format;
  try {
    format = await startMicrophone();
  } catch (error) {
    showNotice(describeMicrophoneError(error));
    setStatus('idle', 'Ready');
    return;
  }
  reconnect.attempts = 0;
  reconnect.everReady = false;
  delete ui.status.dataset.ended;
  if (client && client.state === 'ready' && sameFormat(formatInUse, format)) {
    // Resume: the paused session goes on where it stopped.
    setStatus('listening', 'Listening');
  } else {
    if (client && client.state !== 'closed') {
      const old = client;
      client = null;
      old.end().catch(() => {}); // a different format needs a new session: let the old one finish
    }
    openSession();
  }
  updateButtons();
});

ui.stop.addEventListener('click', () => stopMicrophone({ finalize: true }));

ui.finalize.addEventListener('click', () => {
  if (!client || client.state !== 'ready') return;
  delete ui.status.dataset.finalized;
  setStatus(capture ? 'listening' : 'paused', 'Finalizing…');
  client.finalize().catch(() => {});
});

ui.end.addEventListener('click', async () => {
  if (intent) return;
  intent = 'ending';
  setStatus('ending', 'Ending…');
  await stopMicrophone({ finalize: false });
  if (client && client.state !== 'closed') {
    flushPending(); // the client holds audio until the session is ready
    client.end().catch(() => {}); // the outcome arrives as events
  } else {
    intent = null;
    giveUpSession();
    setStatus('ended', 'Ended');
  }
});

ui.cancel.addEventListener('click', async () => {
  if (intent) return;
  intent = 'cancelling';
  pending = [];
  setStatus('cancelling', 'Cancelling…');
  await stopMicrophone({ finalize: false });
  setVolatile(null);
  if (client && client.state !== 'closed') {
    client.cancel().catch(() => {});
  } else {
    intent = null;
    giveUpSession();
    setStatus('cancelled', 'Cancelled');
  }
});

// ---- downloads ------------------------------------------------------------------------------

function download(text, extension, type) {
  const stamp = new Date().toISOString().slice(0, 16).replace(/[-:]/g, '').replace('T', '-');
  const url = URL.createObjectURL(new Blob([text], { type: `${type};charset=utf-8` }));
  const link = document.createElement('a');
  link.href = url;
  link.download = `steno-${stamp}.${extension}`;
  document.body.append(link);
  link.click();
  link.remove();
  setTimeout(() => URL.revokeObjectURL(url), 10000);
}

ui.downloadTxt.addEventListener('click', () => download(toText(finals), 'txt', 'text/plain'));
ui.downloadVtt.addEventListener('click', () => download(toWebVTT(finals), 'vtt', 'text/vtt'));
ui.downloadSrt.addEventListener('click', () => download(toSRT(finals), 'srt', 'application/x-subrip'));

ui.clear.addEventListener('click', () => {
  finals.length = 0;
  ui.finals.replaceChildren();
  setVolatile(null);
  ui.transcript.classList.remove('has-text');
  delete ui.status.dataset.finalized;
  updateButtons();
});

// ---- the viewer link -------------------------------------------------------------------------

/** view.html?channel=NAME for the channel in Settings (and ?server= when it is not this one).
 * The access token is left out: it may publish. For a server with tokens, add a --viewer-token. */
function updateShareLink() {
  const name = ui.channel.value.trim();
  ui.share.hidden = !isChannelName(name);
  if (ui.share.hidden) return;
  const link = new URL('view.html', location.href);
  link.search = '';
  link.hash = '';
  link.searchParams.set('channel', name);
  const server = ui.server.value.trim();
  if (server && server !== defaultServer) link.searchParams.set('server', server);
  ui.shareChannel.textContent = name;
  ui.viewerLink.href = link.href;
  ui.copyViewerLink.hidden = !navigator.clipboard;
}

ui.channel.addEventListener('input', updateShareLink);
ui.server.addEventListener('input', updateShareLink);
ui.copyViewerLink.addEventListener('click', async () => {
  try {
    await navigator.clipboard.writeText(ui.viewerLink.href);
    ui.copyViewerLink.textContent = 'Copied';
  } catch {
    ui.copyViewerLink.textContent = 'Copy failed';
  }
  setTimeout(() => { ui.copyViewerLink.textContent = 'Copy link'; }, 2000);
});
updateShareLink();

// The settings form has no submit: pressing Enter in a field must not reload the page.
document.getElementById('settings').addEventListener('submit', (event) => event.preventDefault());

updateButtons();
