// The Steno page: microphone → session → captions. The protocol, reconnects, the audio held
// while away and the Opus → PCM fallback live in steno-client.js (StenoPublisher), capture and
// encoding in audio.js, caption files in transcript.js, the caption view in page.js. This file
// is the page: buttons, what they show, the publisher's events. Its elements and its UI state
// (all of it in `page`) are in app/state.js, its Settings in app/settings.js, the microphone in
// app/microphone.js.

import { StenoPublisher, describeError, parsePhrases, streamUrl } from './steno-client.js';
import { describeMicrophoneError } from './audio.js';
import { shortTime, toSRT, toText, toWebVTT } from './transcript.js';
import { reconnectedMessage } from './page.js';
import { alive, captions, clearNotice, notice, page, setStatus, showFormat, ui, updateButtons } from './app/state.js';
import { token } from './app/settings.js';
import { startMicrophone, stopMicrophone } from './app/microphone.js';

const BUFFER_SECONDS = 60; // audio kept while the server cannot take it (full, restarting, away)

// ---- status and notices ---------------------------------------------------------------------

/** A sentence for people about why a session ended, with the server's own words as detail. */
function plainError(error) {
  const sentence = describeError(error?.code || error?.closeCode);
  const detail = error?.message && error.message !== sentence ? error.message : '';
  return detail && !['connection_failed', 'unauthorized', 'forbidden'].includes(error?.code) ? `${sentence} (${detail})` : sentence;
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

updateButtons();
