// The main page's elements (`ui`), its state (`page`), and what shows them: the status line,
// the buttons, the meters, the captions, the notice. app.js, app/settings.js and
// app/microphone.js share them.

import { followNewText } from '../scroll.js';
import { CaptionView, Notice, formatBytes, setStatusLine } from '../page.js';

const $ = (id) => document.getElementById(id);
export const ui = {
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

// ---- the page's state: everything it remembers, in one place --------------------------------

export const page = {
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

export const notice = new Notice(ui.error);
const followIfStuck = followNewText(ui.transcript, ui.jump); // until the reader scrolls up
export const captions = new CaptionView({
  root: ui.finals,
  volatile: ui.volatile,
  onChange: () => {
    ui.transcript.classList.toggle('has-text', captions.finals.length > 0 || !!captions.volatile);
    updateButtons();
    followIfStuck();
  },
});

// ---- status and notices ---------------------------------------------------------------------

export function setStatus(state, text) {
  setStatusLine(ui.status, state, text);
  if (state !== 'listening') ui.speech.hidden = true;
  if (state !== 'waiting' && state !== 'reconnecting') delete ui.status.dataset.reason;
  updateButtons();
}

export function alive(publisher) {
  return !!publisher && publisher.state !== 'closed';
}

export function updateButtons() {
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

export function refreshMeters() {
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

export function showFormat(format) {
  ui.format.textContent = format.reason ? `${format.label} — ${format.reason}` : format.label;
  ui.format.dataset.encoding = format.encoding;
  ui.format.dataset.sampleRate = String(format.sampleRate);
}

export function clearNotice() {
  notice.clear();
  delete ui.error.dataset.about;
  delete ui.error.dataset.lostSeconds;
}
