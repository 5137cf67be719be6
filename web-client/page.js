// What the captioning page (index.html) and the viewer page (view.html) share: captions laid
// out as paragraphs with their time, the volatile line, the status line and the notice.

import { clockLabel, shortTime } from './transcript.js';

/** Seconds between the end of one final and the start of the next that begin a new paragraph. */
export const PARAGRAPH_GAP = 2.0;

/**
 * Captions as paragraphs: finals in order, a new paragraph after a pause of PARAGRAPH_GAP
 * seconds (or where breakParagraph() asks for one), each paragraph headed by its start time
 * (visible, not only on hover), and the volatile guess after the latest final, replaced in
 * place. Times are those of the caller's timeline.
 *
 *   <p class="paragraph" data-start="12.340">
 *     <time class="paragraph-time" datetime="PT12.34S">0:12</time>
 *     <span class="paragraph-text"><span class="final" data-start data-end title="0:12.34 – 0:15.02">…</span>…</span>
 *   </p>
 */
export class CaptionView {
  /**
   * @param {object} o
   * @param {Element} o.root  where paragraphs go (until startSection names another element)
   * @param {Element} o.volatile  the volatile line (moved to where the next words will go)
   * @param {() => void} [o.onChange]  after every change (e.g. to follow new text)
   * @param {boolean} [o.dedupe]  drop a final that ends where the latest one did, or before
   *        (a backfill repeating what is shown)
   * @param {(final) => string} [o.title]  the hover title of a final (default: its time range)
   */
  constructor({ root, volatile, onChange = () => {}, dedupe = false, title = null, gap = PARAGRAPH_GAP }) {
    this.root = root;
    this.volatileEl = volatile;
    this.volatileEl.setAttribute('aria-hidden', 'true'); // a guess, replaced many times a second: not read out
    this.onChange = onChange;
    this.dedupe = dedupe;
    this.title = title || ((f) => `${shortTime(f.start)} – ${shortTime(f.end)}`);
    this.gap = gap;
    this.finals = []; // every final shown: {start, end, text, words}
    this.volatile = null; // the volatile result shown, or null
    this._container = root;
    this._paragraph = null; // {element, text, lastEnd, finals}
    this._pending = null; // a paragraph made for the volatile line, before its first final
    this._break = false;
  }

  get lastFinal() {
    return this._paragraph?.lastFinal ?? null;
  }

  /** From now on paragraphs go into `container` (the viewer's section of a new broadcast). */
  startSection(container) {
    this._dropPending();
    this._container = container;
    this._paragraph = null;
    this._break = false;
  }

  /** The next final starts a new paragraph (e.g. the microphone was turned on again). */
  breakParagraph() {
    this._break = true;
  }

  /** Adds a final; returns its element, or null when it has no text (or repeats one shown). */
  addFinal(final) {
    // A final supersedes the volatile result over its range.
    if (this.volatile && this.volatile.start < final.end) this.setVolatile(null);
    const text = String(final.text ?? '').trim();
    if (!text) return null;
    if (this.dedupe && this._paragraph && final.end <= this._paragraph.lastEnd + 0.0005) return null;
    const paragraph = this._paragraphFor(final.start, { forFinal: true });
    const span = document.createElement('span');
    span.className = 'final';
    span.textContent = `${text} `;
    span.title = this.title(final);
    span.dataset.start = final.start.toFixed(3);
    span.dataset.end = final.end.toFixed(3);
    // A multilingual model says what language each final is in: screen readers and
    // hyphenation follow the element's `lang`, and a tag shows where the language changes.
    const nodes = [span];
    if (typeof final.language === 'string' && /^[A-Za-z]{2,8}$/.test(final.language)) {
      // A translation names the language spoken (the tag), but its text is English.
      span.lang = final.original ? 'en' : final.language;
      if (final.language !== this._language) {
        const tag = document.createElement('span');
        tag.className = 'lang-tag';
        tag.textContent = final.language;
        tag.title = languageName(final.language);
        nodes.unshift(tag);
      }
      this._language = final.language;
    }
    for (const node of nodes) {
      if (this.volatileEl.parentNode === paragraph.text) paragraph.text.insertBefore(node, this.volatileEl);
      else paragraph.text.append(node);
    }
    paragraph.lastEnd = final.end;
    paragraph.lastFinal = { start: final.start, end: final.end };
    this.finals.push({ start: final.start, end: final.end, text, words: final.words });
    if (this.volatile) this.setVolatile(this.volatile); // a guess past this final stays after it
    else this.onChange();
    return span;
  }

  /** Shows the volatile guess ({start, end, text}) in place of the previous one; null clears it. */
  setVolatile(result) {
    this.volatile = result && result.text ? result : null;
    this.volatileEl.textContent = this.volatile ? this.volatile.text : '';
    if (this.volatile) {
      this._paragraphFor(this.volatile.start, { forFinal: false }).text.append(this.volatileEl);
    } else {
      this._dropPending();
    }
    this.onChange();
  }

  /** Removes every caption. */
  clear() {
    this.finals = [];
    this.volatile = null;
    this.volatileEl.textContent = '';
    this.root.replaceChildren();
    this.root.append(this.volatileEl);
    this._container = this.root;
    this._paragraph = null;
    this._pending = null;
    this._language = undefined;
    this._break = false;
    this.onChange();
  }

  /** The paragraph words starting at `start` belong to: the current one, or a new one. */
  _paragraphFor(start, { forFinal }) {
    const current = this._paragraph;
    const continues = current && !this._break && start - current.lastEnd < this.gap;
    if (continues) {
      this._dropPending();
      return current;
    }
    let paragraph = this._pending;
    if (!paragraph) {
      paragraph = this._makeParagraph(start);
      this._pending = paragraph;
    } else if (forFinal) {
      this._label(paragraph, start); // the paragraph begins with this final, not with the guess
    }
    if (forFinal) {
      this._pending = null;
      this._paragraph = paragraph;
      this._break = false;
    }
    return paragraph;
  }

  _makeParagraph(start) {
    const element = document.createElement('p');
    element.className = 'paragraph';
    const time = document.createElement('time');
    time.className = 'paragraph-time';
    const text = document.createElement('span');
    text.className = 'paragraph-text';
    element.append(time, text);
    this._container.append(element);
    const paragraph = { element, time, text, lastEnd: -Infinity, lastFinal: null };
    this._label(paragraph, start);
    return paragraph;
  }

  _label(paragraph, start) {
    paragraph.element.dataset.start = start.toFixed(3);
    paragraph.time.textContent = clockLabel(start);
    paragraph.time.dateTime = `PT${Math.max(0, start).toFixed(3)}S`;
    paragraph.time.title = shortTime(start);
  }

  /** Removes the paragraph made for a volatile line that did not become final there. */
  _dropPending() {
    const pending = this._pending;
    if (!pending) return;
    this._pending = null;
    if (this.volatileEl.parentNode === pending.text) {
      (this._paragraph?.text ?? this._container).append(this.volatileEl);
    }
    pending.element.remove();
  }
}

/**
 * The stream address of the server that served the page at `pageHref`: `v1/stream` next to
 * the page, so that a page under a sub-path (`https://host/captions/`, which a proxy passes on
 * to Steno's `/`) streams to `wss://host/captions/v1/stream`, as view.html follows
 * `…/captions/v1/listen`. '' for a page not served over HTTP (a file opened from disk).
 */
export function defaultStreamUrl(pageHref) {
  const page = new URL(pageHref);
  if (page.protocol !== 'http:' && page.protocol !== 'https:') return '';
  const url = new URL('v1/stream', page);
  url.protocol = page.protocol === 'https:' ? 'wss:' : 'ws:';
  url.search = '';
  url.hash = '';
  return url.href;
}

/**
 * What the page says when its session was resumed on a new connection: `lost` is the seconds
 * of audio that could not be sent again (declared to the server as a gap).
 */
export function reconnectedMessage(lost) {
  if (!(lost >= 0.05)) return 'Reconnected; nothing was lost.';
  const seconds = lost < 10 ? lost.toFixed(1) : String(Math.round(lost));
  return `Reconnected; ${seconds} s of audio could not be sent again and ${seconds === '1.0' ? 'was' : 'were'} lost.`;
}

/** Sets a status line: its `data-state` (for styles and tests) and its text. */
export function setStatusLine(element, state, text) {
  element.dataset.state = state;
  element.textContent = text;
}

/** A notice (a role=alert element): a sentence, a kind ('error', 'warning'), and an optional button. */
export class Notice {
  constructor(element, { text = element, button = null } = {}) {
    this.element = element;
    this.textEl = text;
    this.button = button;
  }

  show(message, { kind = 'error', action = null } = {}) {
    this.textEl.textContent = message;
    this.element.dataset.kind = kind;
    if (this.button) {
      this.button.hidden = !action;
      if (action) this.button.textContent = action;
    }
    this.element.hidden = false;
  }

  clear() {
    this.element.hidden = true;
    this.textEl.textContent = '';
    delete this.element.dataset.kind;
  }

  get kind() {
    return this.element.hidden ? null : this.element.dataset.kind;
  }
}

export function formatBytes(n) {
  if (n < 1024) return `${n} B`;
  if (n < 1024 * 1024) return `${(n / 1024).toFixed(1)} KB`;
  return `${(n / 1024 / 1024).toFixed(1)} MB`;
}

/** A language's name in English ("Italian" for "it"), or its tag where the browser cannot say. */
export function languageName(tag) {
  try {
    return new Intl.DisplayNames(['en'], { type: 'language' }).of(tag) || tag;
  } catch {
    return tag;
  }
}

/**
 * Fills a language <select> with "Auto" (found for each utterance) and every language of the
 * server's models (fetchModels' list: their `languages`), each once, in the models' order;
 * `wanted` stays chosen, kept as an option of its own when the list lacks it.
 */
export function fillLanguageChoice(select, models, wanted = select.value) {
  select.replaceChildren(new Option('Auto: found for each utterance', 'auto'));
  const seen = new Set(['auto']);
  for (const model of models) {
    for (const code of Array.isArray(model.languages) ? model.languages : []) {
      if (typeof code !== 'string' || seen.has(code)) continue;
      seen.add(code);
      select.append(new Option(`${languageName(code)} (${code})`, code));
    }
  }
  if (wanted && !seen.has(wanted)) select.append(new Option(wanted, wanted));
  select.value = wanted || 'auto';
}

/**
 * Fills a model <select> with the server's models (fetchModels' list: {name, engine, language,
 * default}), after its first option (the server's default); `wanted` stays chosen, and is
 * kept as an option of its own when the list lacks it (asked for in the page address, or the
 * list could not be had): the server then says whether it has it.
 */
export function fillModelChoice(select, models, wanted = select.value) {
  while (select.options.length > 1) select.remove(1);
  for (const model of models) {
    const about = [model.engine, model.language].filter((x) => typeof x === 'string' && x).join(', ');
    select.append(new Option(model.name + (about ? ` (${about})` : '') + (model.default === true ? ' — default' : ''), model.name));
  }
  if (wanted && ![...select.options].some((o) => o.value === wanted)) select.append(new Option(wanted, wanted));
  select.value = wanted || '';
}
