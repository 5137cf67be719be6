// The Steno page: microphone → session → captions. The protocol, reconnects, the audio held
// while away and the Opus → PCM fallback live in steno-client.js (StenoPublisher), capture and
// encoding in audio.js, caption files in transcript.js, the caption view in page.js. This file
// is the page: buttons, what they show, and the UI state, all of it in `page`.

import { StenoPublisher, describeError, fetchModels, isChannelName, parsePhrases, streamUrl } from './steno-client.js';
import { MicrophoneCapture, describeMicrophoneError } from './audio.js';
import { followNewText } from './scroll.js';
import { shortTime, toSRT, toText, toWebVTT } from './transcript.js';
import { CaptionView, Notice, defaultStreamUrl, fillModelChoice, formatBytes, reconnectedMessage, setStatusLine } from './page.js';

const $ = (id) => document.getElementById(id);
const ui = {
  start: $('start'), stop: $('stop'), finalize: $('finalize'), end: $('end'), cancel: $('cancel'),
  status: $('status'), speech: $('speech'), error: $('error'),
  level: $('level'), levelFill: document.querySelector('#level .level-fill'),
  format: $('format'), audioTime: $('audio-time'), lag: $('lag'), buffered: $('buffered'),
  transcript: $('transcript'), finals: $('finals'), volatile: $('volatile'), jump: $('jump'),
  downloadTxt: $('download-txt'), downloadVtt: $('download-vtt'), downloadSrt: $('download-srt'), clear: $('clear'),
  server: $('server-url'), encoding: $('encoding'), language: $('language'), model: $('model'), channel: $('channel'),
  phrases: $('phrases'), profanity: $('profanity'),
  share: $('share'), shareChannel: $('share-channel'), viewerLink: $('viewer-link'), copyViewerLink: $('copy-viewer-link'),
};

const BUFFER_SECONDS = 60; // audio kept while the server cannot take it (full, restarting, away)

// ---- settings from the page address -------------------------------------------------------

const params = new URLSearchParams(location.search);
const token = params.get('token') || '';
// Next to the page, so that the page works under a sub-path (behind a proxy) as at the root.
const defaultServer = defaultStreamUrl(location.href);
ui.server.value = params.get('server') || defaultServer;
ui.encoding.value = ['auto', 'opus', 'pcm'].includes(params.get('encoding')) ? params.get('encoding') : 'auto';
ui.language.value = params.get('language') || 'en-US';
// The server's models, asked for now and whenever the server changes (the address's `model` kept).
fillModelChoice(ui.model, [], params.get('model') || '');
async function loadModels() {
  const wanted = ui.model.value;
  fillModelChoice(ui.model, await fetchModels(ui.server.value.trim() || defaultServer, { token }), wanted);
}
loadModels();
ui.server.addEventListener('change', loadModels);
ui.channel.value = params.get('channel') || '';
ui.profanity.value = ['keep', 'mask', 'remove'].includes(params.get('profanity')) ? params.get('profanity') : '';
// Pauses are left out and declared (`silence`) unless the address says suppression=off.
const suppressSilence = params.get('suppression') !== 'off';

// ---- the page's state: everything it remembers, in one place --------------------------------

const page = {
  capture: null, // MicrophoneCapture while the microphone is on
  captureBase: 0, // transcript time at which the current capture started
  clock: 0, // seconds of audio captured for this transcript (the transcript's timeline)
  publisher: null, // the StenoPublisher audio goes to
  publisherBase: 0, // transcript time at which its timeline starts
  intent: null, // 'ending' | 'cancelling' while the user's End/Cancel is in flight
  pcmFallback: false, // the server refused Opus: PCM from now on
  retryTimer: null, // updates "retrying in N s" while waiting
  reconnectedTimer: null, // takes the "Reconnected" notice away after a while
  level: { peak: 0, shown: 0, frame: 0 }, // the level meter: the latest peak, what it shows, its frame
};

const notice = new Notice(ui.error);
const followIfStuck = followNewText(ui.transcript, ui.jump); // until the reader scrolls up
const captions = new CaptionView({
  root: ui.finals,
  volatile: ui.volatile,
  onChange: () => {
    ui.transcript.classList.toggle('has-text', captions.finals.length > 0 || !!captions.volatile);
    updateButtons();
    followIfStuck();
  },
});

// ---- status and notices ---------------------------------------------------------------------

function setStatus(state, text) {
  setStatusLine(ui.status, state, text);
  if (state !== 'listening') ui.speech.hidden = true;
  if (state !== 'waiting' && state !== 'reconnecting') delete ui.status.dataset.reason;
  updateButtons();
}

/** A sentence for people about why a session ended, with the server's own words as detail. */
function plainError(error) {
  const sentence = describeError(error?.code || error?.closeCode);
  const detail = error?.message && error.message !== sentence ? error.message : '';
  return detail && !['connection_failed', 'unauthorized', 'forbidden'].includes(error?.code) ? `${sentence} (${detail})` : sentence;
}

function alive(publisher) {
  return !!publisher && publisher.state !== 'closed';
}

function updateButtons() {
  const busy = page.intent !== null;
  const open = alive(page.publisher);
  ui.start.disabled = !!page.capture || busy;
  ui.stop.disabled = !page.capture;
  ui.finalize.disabled = busy || page.publisher?.state !== 'open';
  ui.end.disabled = busy || !(page.capture || open);
  ui.cancel.disabled = busy || !(page.capture || open);
  const empty = captions.finals.length === 0;
  ui.downloadTxt.disabled = empty;
  ui.downloadVtt.disabled = empty;
  ui.downloadSrt.disabled = empty;
  ui.clear.disabled = empty && !captions.volatile;
}

function refreshMeters() {
  const publisher = alive(page.publisher) ? page.publisher : null;
  const buffered = publisher ? publisher.bufferedAmount : 0;
  ui.buffered.textContent = formatBytes(buffered);
  ui.buffered.dataset.bytes = String(buffered);
  ui.buffered.dataset.heldSeconds = (publisher ? publisher.bufferedSeconds : 0).toFixed(3);
  ui.buffered.classList.toggle('warn', buffered > 64 * 1024);
  const seconds = page.capture ? page.captureBase + page.capture.capturedSeconds : page.clock;
  ui.audioTime.textContent = `${seconds.toFixed(1)} s`;
  ui.audioTime.dataset.seconds = seconds.toFixed(3);
}
setInterval(refreshMeters, 250);

// Level meter: peaks arrive every 20 ms; draw at most once a frame, falling back smoothly.
function onLevel(peak) {
  const { level } = page;
  level.peak = Math.max(level.peak, peak);
  if (!level.frame) level.frame = requestAnimationFrame(drawLevel);
}
function drawLevel() {
  const { level } = page;
  level.frame = 0;
  const db = level.peak > 0 ? 20 * Math.log10(level.peak) : -100;
  const target = Math.min(1, Math.max(0, (db + 60) / 60)); // −60 dBFS … 0 dBFS
  level.shown = Math.max(target, level.shown * 0.85);
  level.peak = 0;
  ui.levelFill.style.transform = `scaleX(${level.shown.toFixed(3)})`;
  const percent = Math.round(level.shown * 100);
  ui.level.setAttribute('aria-valuenow', String(percent));
  ui.level.setAttribute('aria-valuetext', percent < 5 ? 'silent' : `${percent} percent`);
}
function resetLevel() {
  const { level } = page;
  level.peak = 0;
  level.shown = 0;
  ui.levelFill.style.transform = 'scaleX(0)';
  ui.level.setAttribute('aria-valuenow', '0');
  ui.level.setAttribute('aria-valuetext', 'silent');
}

function showFormat(format) {
  ui.format.textContent = format.reason ? `${format.label} — ${format.reason}` : format.label;
  ui.format.dataset.encoding = format.encoding;
  ui.format.dataset.sampleRate = String(format.sampleRate);
}

// ---- the publisher ----------------------------------------------------------------------------

function sameFormat(a, b) {
  return a && b && a.encoding === b.encoding && a.sampleRate === b.sampleRate && (a.channels || 1) === (b.channels || 1);
}

function newPublisher(format) {
  let url;
  try {
    url = streamUrl(ui.server.value.trim(), { token });
  } catch {
    fail('Enter the server address (ws://… or wss://…) in Settings.');
    return null;
  }
  const { phrases, problem } = parsePhrases(ui.phrases.value);
  if (problem) {
    fail(`Phrases in Settings: ${problem}.`);
    return null;
  }
  const base = page.clock;
  const publisher = new StenoPublisher(url, {
    audio: { encoding: format.encoding, sampleRate: format.sampleRate, channels: format.channels },
    language: ui.language.value.trim() || undefined,
    model: ui.model.value || undefined,
    channel: ui.channel.value.trim() || undefined,
    phrases: phrases.length ? phrases : undefined,
    profanity: ui.profanity.value || undefined,
    volatile: true,
    words: true,
    bufferSeconds: BUFFER_SECONDS,
    pcmFallback: ui.encoding.value === 'auto',
  });
  page.publisher = publisher;
  page.publisherBase = base;
  const current = (fn) => (payload) => { if (page.publisher === publisher) fn(payload); };
  const at = (event) => base + (event.offset ?? 0); // a session's time 0 on the transcript's timeline

  // Finals are shown whichever publisher they come from: one that is finishing in the
  // background (a new format started another) still delivers what it heard.
  publisher.on('final', (event) => {
    const shift = at(event);
    captions.addFinal({
      start: shift + event.start,
      end: shift + event.end,
      text: event.text,
      language: event.language,
      words: Array.isArray(event.words)
        ? event.words.map((w) => ({ ...w, start: shift + w.start, end: shift + w.end }))
        : undefined,
    });
  });
  publisher.on('volatile', current((event) => {
    const shift = at(event);
    captions.setVolatile(event.text ? { start: shift + event.start, end: shift + event.end, text: event.text } : null);
  }));
  publisher.on('speech', current((event) => { ui.speech.hidden = event.state !== 'started' || !page.capture; }));
  publisher.on('progress', current(() => {
    ui.lag.textContent = publisher.lag == null ? '—' : `${publisher.lag.toFixed(1)} s`;
    ui.lag.classList.toggle('warn', publisher.lag > 3);
  }));
  publisher.on('error', current((event) => {
    if (event.fatal) return; // the close that follows says what happened
    // The server's own words say more than the generic sentence (e.g. a channel that already
    // has a publisher, which leaves this session unpublished).
    const said = event.code === 'bad_message' && event.message ? event.message : '';
    notice.show(said ? `${said[0].toUpperCase()}${said.slice(1)}.` : describeError(event.code), { kind: 'warning' });
  }));
  publisher.on('finalized', current((event) => {
    captions.setVolatile(null);
    const through = at(event) + event.through;
    ui.status.dataset.finalized = through.toFixed(3);
    if (page.intent) return;
    if (page.capture) setStatus('listening', `Listening · finalized through ${shortTime(through)}`);
    else setStatus('paused', `Microphone off · finalized through ${shortTime(through)}`);
  }));
  publisher.on('ended', current((event) => {
    captions.setVolatile(null);
    ui.status.dataset.ended = String(event.duration);
    setStatus('ended', `Ended · captioned through ${shortTime(at(event) + Number(event.duration))}`);
  }));
  publisher.on('cancelled', current(() => {
    captions.setVolatile(null);
    setStatus('cancelled', 'Cancelled');
  }));
  publisher.on('resumed', current((event) => {
    // The same session on a new connection: say so, and whether any audio was lost.
    const lost = Number(event.lost) || 0;
    ui.status.dataset.resumed = lost.toFixed(3);
    showReconnected(reconnectedMessage(lost), lost >= 0.05 ? 'warning' : 'info', lost);
  }));
  publisher.on('ready', current((event) => {
    if (!event.resumeFailed) return;
    showReconnected('Reconnected in a new session: the server could no longer continue the old one, so the captions of the moments before the connection dropped may be missing.', 'warning', null);
  }));
  publisher.on('format', current(({ audio }) => {
    // The server does not take Opus: the microphone goes on in PCM at the same rate.
    page.pcmFallback = true;
    const format = page.capture?.usePcm('the server does not accept Opus');
    if (format) showFormat(format);
    else showFormat({ ...audio, label: `PCM 16-bit, ${audio.sampleRate / 1000} kHz mono`, reason: 'the server does not accept Opus' });
    notice.show('The server does not accept Opus audio; sending uncompressed audio instead.', { kind: 'warning' });
  }));
  publisher.on('state', current((change) => onPublisherState(publisher, change)));
  publisher.on('close', current((info) => onPublisherClosed(publisher, info)));
  return publisher;
}

/** The notice after a reconnect; it goes away by itself unless something else is shown meanwhile. */
function showReconnected(text, kind, lost) {
  clearTimeout(page.reconnectedTimer);
  notice.show(text, { kind });
  ui.error.dataset.about = 'reconnected';
  if (lost === null) delete ui.error.dataset.lostSeconds;
  else ui.error.dataset.lostSeconds = lost.toFixed(3);
  page.reconnectedTimer = setTimeout(() => {
    if (ui.error.dataset.about === 'reconnected' && ui.error.textContent === text) clearNotice();
  }, 10000);
}

function stopRetryCountdown() {
  clearInterval(page.retryTimer);
  page.retryTimer = null;
}

/** What the page says while the publisher waits to reconnect, with the seconds left. */
function waitingNotice(publisher, change) {
  const left = Math.max(0, Math.ceil((publisher.retryAt - Date.now()) / 1000));
  const when = left >= 1 ? `in ${left} s` : 'now';
  const kept = publisher.bufferedSeconds > 0
    ? ` The audio meanwhile is kept (up to ${BUFFER_SECONDS} s) and sent when it is back.` : '';
  switch (change.reason) {
    case 'full':
      return `The server is at capacity; retrying ${when}…${kept}`;
    case 'restarting':
      return `The server is restarting; reconnecting when it is back (next try ${when})…${kept}`;
    case 'session_limit':
      return `${describeError('session_limit')} Starting a new one…`;
    default: {
      const why = change.reason === 'unreachable' ? describeError('connection_failed') : describeError(change.error?.closeCode ?? change.error?.code ?? 'connection_lost');
      return `${why} Reconnecting ${when}…${kept}`;
    }
  }
}

/** The status line while the publisher waits to reconnect, by why it waits. */
function showWaiting(reason) {
  const [state, text] = {
    full: ['waiting', 'Server full — waiting'],
    restarting: ['reconnecting', 'Server restarting — waiting'],
  }[reason] ?? ['reconnecting', 'Reconnecting'];
  setStatus(state, text);
  ui.status.dataset.reason = reason;
}

function onPublisherState(publisher, change) {
  stopRetryCountdown();
  switch (change.state) {
    case 'connecting':
      if (!page.intent) {
        const again = publisher.sessions > 0 || publisher.attempt > 0;
        setStatus(again ? 'reconnecting' : 'connecting', again ? 'Reconnecting…' : 'Connecting…');
      }
      break;
    case 'open':
      if (notice.kind === 'warning' && ui.error.dataset.about === 'connection') clearNotice();
      if (!page.intent) setStatus(page.capture ? 'listening' : 'paused', page.capture ? 'Listening' : 'Microphone off');
      break;
    case 'reconnecting': {
      captions.setVolatile(null); // it may never become final as it is
      ui.lag.textContent = '—';
      const show = () => {
        notice.show(waitingNotice(publisher, change), { kind: 'warning' });
        ui.error.dataset.about = 'connection';
      };
      show();
      page.retryTimer = setInterval(show, 1000);
      showWaiting(change.reason);
      break;
    }
    case 'idle':
      captions.setVolatile(null);
      if (!page.intent && !page.capture) setStatus('idle', 'Microphone off');
      break;
    default:
      break;
  }
}

function clearNotice() {
  notice.clear();
  delete ui.error.dataset.about;
  delete ui.error.dataset.lostSeconds;
}

function onPublisherClosed(publisher, { error }) {
  stopRetryCountdown();
  page.publisher = null;
  ui.lag.textContent = '—';
  ui.lag.classList.remove('warn');
  ui.speech.hidden = true;
  captions.setVolatile(null);
  if (page.intent) {
    const was = page.intent;
    page.intent = null;
    if (error && !(was === 'ending' && ui.status.dataset.state === 'ended')) {
      notice.show(plainError(error));
      setStatus('error', was === 'ending' ? 'Ended with an error' : 'Cancelled with an error');
    } else if (ui.status.dataset.state !== 'ended' && ui.status.dataset.state !== 'cancelled') {
      if (ui.error.dataset.about === 'connection') clearNotice();
      if (was === 'ending' && publisher.droppedSeconds > 0.05) {
        notice.show(`The last ${Math.round(publisher.droppedSeconds)} s of audio could not be captioned: the server was not reachable.`, { kind: 'warning' });
      }
      setStatus(was === 'ending' ? 'ended' : 'cancelled', was === 'ending' ? 'Ended' : 'Cancelled');
    }
    updateButtons();
    return;
  }
  if (!error) {
    setStatus('idle', page.capture ? 'Disconnected' : 'Ready');
    stopMicrophone({ finalize: false });
    return;
  }
  if (error.code === 'unauthorized') {
    fail('The server refused the access token, so captioning stopped. Open this page with the right one: …?token=YOUR-TOKEN');
  } else if (error.code === 'forbidden') {
    fail('The server does not accept connections from this page (its address is not among the allowed origins).');
  } else if (error.code === 'connection_failed') {
    fail(`Could not connect to the captioning server at ${ui.server.value.trim()}. It may be down, or the address may be wrong.`);
  } else {
    fail(plainError(error));
  }
}

function fail(message) {
  const publisher = page.publisher;
  page.publisher = null;
  if (alive(publisher)) publisher.close(1000, 'client stopped');
  notice.show(message);
  setStatus('error', 'Stopped');
  stopMicrophone({ finalize: false });
}

// ---- audio ----------------------------------------------------------------------------------

function onChunk(chunk) {
  if (page.intent === 'cancelling') return;
  page.clock = Math.max(page.clock, page.captureBase + chunk.t0 + chunk.seconds);
  const publisher = page.publisher;
  // A chunk in the format the publisher no longer takes (Opus encoded before a switch to PCM) is left out.
  if (!alive(publisher) || publisher.state === 'ending' || chunk.encoding !== publisher.audio.encoding) return;
  publisher.sendAudio(chunk.data);
}

/** A pause the microphone's capture left out: declared in its place among the audio. */
function onSilence(silence) {
  if (page.intent === 'cancelling') return;
  page.clock = Math.max(page.clock, page.captureBase + silence.t0 + silence.seconds);
  const publisher = page.publisher;
  if (!alive(publisher) || publisher.state === 'ending') return;
  publisher.silence(silence.seconds);
}

async function startMicrophone() {
  const mic = new MicrophoneCapture({
    encoding: page.pcmFallback ? 'pcm' : ui.encoding.value,
    pcmReason: page.pcmFallback ? 'the server does not accept Opus' : 'forced in settings',
    onChunk,
    onSilence,
    suppressSilence,
    onLevel,
    onEnded: () => {
      notice.show('The microphone was disconnected.');
      stopMicrophone({ finalize: true });
    },
    onError: (message) => {
      notice.show(message);
      stopMicrophone({ finalize: true });
    },
  });
  const format = await mic.start();
  page.capture = mic;
  page.captureBase = page.clock;
  showFormat(format);
  return format;
}

async function stopMicrophone({ finalize }) {
  const mic = page.capture;
  if (!mic) return;
  page.capture = null;
  updateButtons();
  await mic.stop(); // delivers the last audio through onChunk
  page.clock = Math.max(page.clock, page.captureBase + mic.capturedSeconds);
  resetLevel();
  refreshMeters();
  const publisher = page.publisher;
  if (!alive(publisher)) return;
  publisher.pause(); // no audio for now: after a drop, wait for the microphone
  if (!finalize || page.intent) return;
  if (publisher.state === 'open') {
    delete ui.status.dataset.finalized;
    setStatus('paused', 'Microphone off — finalizing…');
  }
  publisher.finalize().catch(() => {}); // held with the audio while the server is away
}

// ---- buttons --------------------------------------------------------------------------------

ui.start.addEventListener('click', async () => {
  if (page.capture || page.intent) return;
  if (ui.error.dataset.kind === 'error') clearNotice();
  ui.start.disabled = true;
  setStatus('starting', 'Starting microphone…');
  let format;
  try {
    format = await startMicrophone();
  } catch (error) {
    notice.show(describeMicrophoneError(error));
    setStatus('idle', 'Ready');
    return;
  }
  delete ui.status.dataset.ended;
  captions.breakParagraph(); // speaking again after the microphone was off: a new paragraph
  const publisher = page.publisher;
  if (alive(publisher) && sameFormat(publisher.audio, format)) {
    // The paused session goes on where it stopped (or a new one opens on the first audio).
    if (publisher.state === 'open') setStatus('listening', 'Listening');
    else if (publisher.state === 'reconnecting') showWaiting(publisher.reason);
    else setStatus('connecting', 'Connecting…');
  } else {
    if (alive(publisher)) publisher.end().catch(() => {}); // another format needs a new session: let this one finish
    const next = newPublisher(format);
    if (next) next.start().catch(() => {}); // the outcome arrives as events
  }
  updateButtons();
});

ui.stop.addEventListener('click', () => stopMicrophone({ finalize: true }));

ui.finalize.addEventListener('click', () => {
  if (page.publisher?.state !== 'open') return;
  delete ui.status.dataset.finalized;
  setStatus(page.capture ? 'listening' : 'paused', 'Finalizing…');
  page.publisher.finalize().catch(() => {});
});

ui.end.addEventListener('click', async () => {
  if (page.intent) return;
  page.intent = 'ending';
  setStatus('ending', 'Ending…');
  await stopMicrophone({ finalize: false });
  if (alive(page.publisher)) {
    page.publisher.end().catch(() => {}); // the outcome arrives as events
  } else {
    page.intent = null;
    setStatus('ended', 'Ended');
  }
});

ui.cancel.addEventListener('click', async () => {
  if (page.intent) return;
  page.intent = 'cancelling';
  setStatus('cancelling', 'Cancelling…');
  await stopMicrophone({ finalize: false });
  captions.setVolatile(null);
  if (alive(page.publisher)) {
    page.publisher.cancel().catch(() => {});
  } else {
    page.intent = null;
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

ui.downloadTxt.addEventListener('click', () => download(toText(captions.finals), 'txt', 'text/plain'));
ui.downloadVtt.addEventListener('click', () => download(toWebVTT(captions.finals), 'vtt', 'text/vtt'));
ui.downloadSrt.addEventListener('click', () => download(toSRT(captions.finals), 'srt', 'application/x-subrip'));

ui.clear.addEventListener('click', () => {
  captions.clear();
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
