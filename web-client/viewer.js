// The viewer page: follows a broadcast channel (`view.html?channel=NAME`) and shows its
// captions. The protocol, reconnects and backfill de-duplication live in steno-client.js
// (StenoViewer); this file is the page: sections per broadcast, status, the connection, the
// language. Text size, theme and full screen are in viewer/display.js; the language's addresses
// and picker in viewer/language.js.

import { StenoViewer, captionsUrl, describeError, isChannelName } from './steno-client.js';
import { followNewText } from './scroll.js';
import { shortTime } from './transcript.js';
import { CaptionView, Notice, languageName, setStatusLine } from './page.js';
import { setUpDisplay } from './viewer/display.js';
import { channelsUrl, languageChoice, languageOptions } from './viewer/language.js';

const $ = (id) => document.getElementById(id);
const ui = {
  channelLabel: $('viewer-channel-label'), channel: $('viewer-channel'), status: $('viewer-status'),
  join: $('viewer-join'), channelInput: $('viewer-channel-input'), joinError: $('viewer-join-error'),
  notice: $('viewer-notice'), noticeText: $('viewer-notice-text'), reconnect: $('viewer-reconnect'),
  captions: $('viewer-captions'), transcript: $('viewer-transcript'), placeholder: $('viewer-placeholder'),
  finals: $('viewer-finals'), volatile: $('viewer-volatile'), jump: $('viewer-jump'),
  toolbar: $('viewer-toolbar'), smaller: $('viewer-smaller'), larger: $('viewer-larger'), size: $('viewer-font-size'),
  theme: $('viewer-theme'), fullscreen: $('viewer-fullscreen'), languageGroup: $('viewer-language-group'), language: $('viewer-language'),
  downloads: { txt: $('viewer-download-txt'), vtt: $('viewer-download-vtt'), srt: $('viewer-download-srt') },
};

const followIfStuck = followNewText(ui.transcript, ui.jump); // until the reader scrolls up

// ---- settings from the page address -------------------------------------------------------

const params = new URLSearchParams(location.search);
const channel = (params.get('channel') || '').trim();
const token = params.get('token') || '';
// The server is the one that serves this page (in the same folder, so a path prefix of a
// reverse proxy is kept), unless ?server= names another.
const server = params.get('server') || new URL('./', location.href).href;
// Seconds without any caption event after which the status says the broadcast is paused (the
// server says when it ends: the `publisher` event).
const quietSeconds = Math.max(1, Number(params.get('quiet')) || 30);
// The language followed ('': the publisher's own captions); one the server would refuse is left out.
let language = languageChoice(params.get('language'));

// ---- display: text size, theme, full screen (viewer/display.js) ----------------------------

setUpDisplay(ui, params, followIfStuck);
// A size, theme or window change moves the text: stay at the end if that is where we were.
if (typeof ResizeObserver !== 'undefined') new ResizeObserver(() => followIfStuck()).observe(ui.transcript);

// ---- captions: one section per broadcast ----------------------------------------------------

const broadcasts = []; // {startedAt, number, section}
let current = null; // the broadcast captions go to; null until the latest one shows something
let pendingStartedAt = null; // `startedAt` of the latest broadcast, before its section exists

const captions = new CaptionView({
  root: ui.finals,
  volatile: ui.volatile,
  dedupe: true, // a backfill after reconnecting repeats what this broadcast showed
  // Times on this broadcast's own timeline (each publisher's starts at 0).
  title: (f) => `${shortTime(f.start)} – ${shortTime(f.end)}${current && current.number > 1 ? ` (broadcast ${current.number})` : ''}`,
  onChange: () => followIfStuck(),
});

function clockTime(iso) {
  const date = new Date(iso);
  if (Number.isNaN(date.getTime())) return '';
  const time = date.toLocaleTimeString(undefined, { hour: 'numeric', minute: '2-digit' });
  return date.toDateString() === new Date().toDateString()
    ? time
    : `${date.toLocaleDateString(undefined, { month: 'short', day: 'numeric' })}, ${time}`;
}

/** The section of the current broadcast, made when it first has something to show. */
function currentSection() {
  if (current) return current;
  const number = broadcasts.length + 1;
  const section = document.createElement('section');
  section.className = 'broadcast';
  section.dataset.broadcast = String(number);
  if (pendingStartedAt) section.dataset.startedAt = pendingStartedAt;
  const heading = document.createElement('h3');
  heading.className = 'broadcast-heading';
  const when = pendingStartedAt ? clockTime(pendingStartedAt) : '';
  heading.textContent = number === 1
    ? (when ? `Broadcast started at ${when}` : 'Broadcast')
    : (when ? `New broadcast, started at ${when}` : 'New broadcast');
  const paragraphs = document.createElement('div');
  paragraphs.className = 'caption-text paragraphs';
  section.append(heading, paragraphs);
  ui.finals.append(section);
  captions.startSection(paragraphs);
  current = { startedAt: pendingStartedAt, number, section };
  broadcasts.push(current);
  ui.transcript.classList.add('has-text');
  return current;
}

function setVolatile(result) {
  if (result && result.text) currentSection();
  captions.setVolatile(result);
}

function addFinal(event) {
  if ((event.text || '').trim()) currentSection();
  // Its element's `lang`: a translated final (with its `original`) names the language spoken, but is in the
  // captions' (English, the only one Whisper translates into, until the channel's languages are known).
  captions.addFinal(event.original ? { ...event, language: (languages[0] !== 'original' && languages[0]) || 'en' } : event);
}

// ---- status ---------------------------------------------------------------------------------

const status = {
  connection: 'connecting', // connecting | open | reconnecting | closed
  live: false, // caption activity seen since the latest `joined`
  quiet: false, // … and then nothing for quietSeconds
  lastEventAt: null,
  restarted: false, // the latest broadcast followed another one on this page
  reconnects: 0,
  publisher: null, // the broadcast's state as the server says it: 'live', 'ended', 'lost' (null: none yet)
  overAt: null, // when it ended or was lost
  relayDown: false, // the server's link to the broadcast's instance is down (`relay`, a cluster)
};
let quietTimer = null;

const setStatus = (state, text) => setStatusLine(ui.status, state, text);

function refreshStatus() {
  const connection = {
    connecting: ['connecting', status.reconnects ? 'Reconnecting…' : 'Connecting…'],
    reconnecting: ['reconnecting', 'Disconnected — reconnecting'],
    closed: ['disconnected', 'Disconnected'],
  }[status.connection];
  if (connection) {
    setStatus(...connection);
    return;
  }
  if (status.relayDown) {
    // Captions are held, not lost: they follow when the link is back.
    setStatus('reconnecting', 'Captions delayed — the server lost its link to the broadcast; they will follow');
    return;
  }
  if (status.publisher === 'ended' || status.publisher === 'lost') {
    const at = status.overAt ? ` at ${clockTime(status.overAt.toISOString())}` : '';
    if (status.publisher === 'ended') setStatus('ended', `The broadcast ended${at}`);
    else setStatus('lost', `The broadcast stopped${at}: its connection was lost`);
  } else if (status.live) {
    setStatus('live', 'Live');
  } else if (status.quiet) {
    const since = status.lastEventAt ? ` since ${clockTime(status.lastEventAt.toISOString())}` : '';
    setStatus('quiet', status.publisher === 'live' ? `Live — no captions${since}` : `No captions${since} — paused or ended`);
  } else if (status.restarted) {
    setStatus('waiting', 'A new broadcast started — waiting for captions');
  } else if (current && captions.lastFinal) {
    setStatus('waiting', 'Connected — waiting for new captions');
  } else {
    setStatus('waiting', 'Waiting for the broadcast to start');
  }
}

/** Any event from the channel: the quiet clock starts again. */
function activity() {
  status.lastEventAt = new Date();
  clearTimeout(quietTimer);
  quietTimer = setTimeout(onQuiet, quietSeconds * 1000);
}

function onQuiet() {
  quietTimer = null;
  // A publisher that leaves mid-utterance leaves its last guess showing: it will not be
  // replaced now, and it may never have become final as it is.
  if (captions.volatile) setVolatile(null);
  if (status.live) Object.assign(status, { live: false, quiet: true });
  refreshStatus();
}

const markLive = () => Object.assign(status, { live: true, quiet: false });

const notice = new Notice(ui.notice, { text: ui.noticeText, button: ui.reconnect });
const showNotice = (text, { button = null } = {}) => notice.show(text, { action: button });
const clearNotice = () => notice.clear();

// ---- the connection -------------------------------------------------------------------------

let viewer = null;

function follow() {
  const v = new StenoViewer(server, channel, { token, language }); // every (re)connection asks for it
  const previous = viewer;
  viewer = v;
  previous?.close(); // after a change of language (its events no longer count); else closed or none
  const mine = (fn) => (payload) => { if (viewer === v) fn(payload); };

  v.on('state', mine(({ state, delay, error }) => {
    status.connection = state;
    if (state === 'connecting') {
      if (status.reconnects) showNotice('Connecting to the captioning server again…');
    } else if (state === 'open') {
      clearNotice();
    } else if (state === 'reconnecting') {
      status.reconnects += 1;
      status.live = false;
      clearTimeout(quietTimer);
      const why = error?.code === 'connection_failed' ? describeError('connection_failed') : describeError(error?.closeCode ?? error?.code);
      const when = delay >= 1 ? `in ${Math.round(delay)} s` : 'now';
      showNotice(`${why} Trying again ${when}. The captions so far stay here.`, { button: 'Reconnect now' });
    } else if (state === 'closed') {
      status.live = false;
      clearTimeout(quietTimer);
      if (captions.volatile) setVolatile(null);
      if (error?.code === 'unauthorized') {
        // Trying again would be refused again: no button.
        showNotice(`${describeError('unauthorized')} Ask for a viewer link with the right token (…&token=…).`);
      } else if (error) {
        const why = error.code === 'connection_failed'
          ? `Could not connect to the captioning server for channel “${channel}”. It may be down, or the link may need an access token.`
          : describeError(error.code);
        showNotice(why, { button: 'Try again' });
      } else {
        showNotice('The server ended this connection.', { button: 'Try again' });
      }
    }
    refreshStatus();
    keepAwake();
  }));

  v.on('joined', mine((event) => {
    activity();
    setVolatile(null); // a new connection sends the volatile showing again, if any
    const same = current ? event.startedAt === current.startedAt : event.startedAt === pendingStartedAt;
    if (!(event.resumed || same)) {
      // A new broadcast (a new publisher, whose timeline starts again at 0): the captions
      // so far stay, the new ones go below them.
      status.restarted = captions.finals.length > 0;
      current = null;
      pendingStartedAt = event.startedAt;
    }
    status.live = false;
    status.quiet = false;
    status.publisher = null; // a `publisher` event follows when the channel has a broadcast
    status.relayDown = false; // the server sends `relay` only when its link changes: a new connection starts from up
    refreshStatus();
  }));

  v.on('relay', mine((event) => {
    // A cluster's instances share broadcasts through Redis; this viewer's instance lost (or
    // found again) its link to the one the publisher is on (docs/protocol.md, `relay`).
    status.relayDown = event.state === 'down';
    refreshStatus();
  }));

  v.on('publisher', mine((event) => {
    // At once: the broadcast started, ended, or lost its publisher.
    status.publisher = event.state;
    if (event.state === 'live') {
      markLive();
      status.overAt = null;
      activity();
      askLanguages(); // a new broadcast may carry other languages
    } else {
      Object.assign(status, { live: false, quiet: false, overAt: new Date() });
      clearTimeout(quietTimer);
      // The last guess of a broadcast that is over will not become final now.
      if (captions.volatile) setVolatile(null);
    }
    refreshStatus();
  }));

  v.on('final', mine((event) => {
    activity();
    // Not a sign of life by itself: the backfill of a broadcast that has ended is finals too.
    addFinal(event);
    refreshStatus();
  }));

  v.on('volatile', mine((event) => {
    activity();
    markLive();
    setVolatile(event);
    refreshStatus();
  }));

  v.on('speech', mine(() => {
    activity();
    markLive();
    refreshStatus();
  }));

  v.on('error', mine((event) => { // not fatal: a language the broadcast lacks (the server sends its own)
    if (event.code === 'bad_message' && language) showNotice(`This broadcast has no captions in “${language}”: here in its own language.`);
  }));

  v.start().catch(() => {}); // failures arrive as 'state' events
}

ui.reconnect.addEventListener('click', () => {
  if (viewer && viewer.state === 'reconnecting') {
    viewer.reconnectNow();
  } else if (!viewer || viewer.state === 'closed') {
    status.reconnects += 1;
    follow(); // the page keeps its captions and does not repeat those it shows
  }
});

// Come back at once when the device is back online or the page is looked at again (phones
// suspend pages in the background, and their connections with them).
window.addEventListener('online', () => viewer?.reconnectNow());
document.addEventListener('visibilitychange', () => {
  if (document.visibilityState === 'visible') {
    viewer?.reconnectNow();
    keepAwake();
  }
});

// Keep the screen on while following (phones and projectors dim otherwise). Needs a secure page.
let wakeLock = null;
async function keepAwake() {
  const wanted = viewer && viewer.state !== 'closed' && document.visibilityState === 'visible';
  try {
    if (wanted && !wakeLock && navigator.wakeLock) {
      wakeLock = await navigator.wakeLock.request('screen');
      wakeLock.addEventListener('release', () => { wakeLock = null; });
    } else if (!wanted && wakeLock) {
      await wakeLock.release();
      wakeLock = null;
    }
  } catch {
    wakeLock = null; // not allowed here (e.g. not https, or battery saver): the screen may dim
  }
}

// ---- the language: a picker when the broadcast carries two or more -------------------------

let languages = []; // the channel's, as /v1/channels lists them
let languagesAsked = 0;

function setDownloads() {
  for (const [format, link] of Object.entries(ui.downloads)) {
    link.href = captionsUrl(server, channel, format, { token, language });
    link.download = `${channel}${language ? `.${language}` : ''}.${format}`;
  }
}

/** Asks the server which languages the channel's broadcast carries (the picker stays as it was when it cannot say). */
async function askLanguages() {
  const asked = ++languagesAsked;
  const body = await fetch(channelsUrl(server, channel, { token }), { cache: 'no-store' })
    .then((response) => (response.ok ? response.json() : null)).catch(() => null);
  if (asked !== languagesAsked || !Array.isArray(body?.channels)) return; // a later answer counts
  const { options, selected } = languageOptions(body.channels.find((c) => c?.name === channel), language);
  languages = options.map((o) => o.value);
  ui.language.replaceChildren(...options.map(({ value, label }) => Object.assign(new Option(label, value),
    { title: value === 'original' ? 'What was said, in the language spoken' : languageName(value) })));
  ui.language.selectedIndex = selected;
  ui.languageGroup.hidden = options.length < 2;
}

ui.language.addEventListener('change', () => {
  language = ui.language.value;
  params.set('language', language);
  history.replaceState(history.state, '', `?${params}${location.hash}`); // a link to this language
  setDownloads();
  // Start again in it (the server sends the broadcast so far in it); `joined` starts the quiet clock again.
  captions.clear();
  ui.finals.after(ui.volatile); // back where it was before any caption
  broadcasts.length = 0;
  current = pendingStartedAt = null;
  ui.transcript.classList.remove('has-text');
  Object.assign(status, { live: false, quiet: false, restarted: false, publisher: null, overAt: null, relayDown: false });
  follow(); // its `open` clears the notice
});

// ---- start ----------------------------------------------------------------------------------

function showJoinForm(message) {
  ui.join.hidden = false;
  ui.captions.hidden = true;
  ui.toolbar.hidden = true;
  ui.channelLabel.hidden = true;
  setStatus('idle', 'Choose a channel');
  if (message) {
    ui.joinError.textContent = message;
    ui.joinError.hidden = false;
    ui.channelInput.setAttribute('aria-invalid', 'true');
  }
  ui.channelInput.focus();
}

ui.join.addEventListener('submit', (event) => {
  event.preventDefault();
  const name = ui.channelInput.value.trim();
  if (!isChannelName(name)) {
    showJoinForm(name
      ? `“${name}” is not a channel name: use 1–64 letters, digits, “-”, “_” or “.”.`
      : 'Enter the name of the channel to follow.');
    return;
  }
  params.set('channel', name);
  location.search = params.toString(); // a page address that can be shared and bookmarked
});

if (!channel) {
  showJoinForm();
} else if (!isChannelName(channel)) {
  ui.channelInput.value = channel;
  showJoinForm(`“${channel}” is not a channel name: use 1–64 letters, digits, “-”, “_” or “.”.`);
} else {
  document.title = `${channel} — Steno live captions`;
  ui.channel.textContent = channel;
  ui.channelLabel.hidden = false;
  ui.captions.hidden = false;
  ui.toolbar.hidden = false;
  setDownloads();
  refreshStatus();
  follow();
  askLanguages();
}
