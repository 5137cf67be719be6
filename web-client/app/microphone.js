// The main page's microphone: its capture, the level meter, and its audio and pauses handed to
// the publisher.

import { MicrophoneCapture } from '../audio.js';
import { alive, notice, page, refreshMeters, setStatus, showFormat, ui, updateButtons } from './state.js';
import { suppressSilence } from './settings.js';

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

export async function startMicrophone() {
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

export async function stopMicrophone({ finalize }) {
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
