// Transcript exports built from final results: plain text, WebVTT and SRT, laid out by the
// server's own rule (Sources/StenoCore/Captions.swift), so that the page's files for a set of
// finals are the server's `/v1/channels/NAME/captions.txt|vtt|srt` for the same finals, byte
// for byte. A final is { start, end, text, words? } with times in seconds; words are
// { word, start, end } as the server sends them.

// The caption rules' defaults (CaptionLayout in Captions.swift): lines, characters per line,
// shortest and longest cue in seconds.
export const CAPTION_LAYOUT = Object.freeze({ maxLineLength: 42, maxLines: 2, minDuration: 1, maxDuration: 7 });

/** "1:02.35" for a short label (hover titles, the status line). */
export function shortTime(seconds) {
  const cs = Math.max(0, Math.round(seconds * 100));
  const m = Math.floor(cs / 6000);
  const s = (cs % 6000) / 100;
  return `${m}:${s.toFixed(2).padStart(5, '0')}`;
}

/** "1:02" (or "1:01:02" past an hour): the time of a paragraph, to the second. */
export function clockLabel(seconds) {
  const total = Math.max(0, Math.floor(seconds));
  const h = Math.floor(total / 3600);
  const m = Math.floor(total / 60) % 60;
  const s = String(total % 60).padStart(2, '0');
  return h > 0 ? `${h}:${String(m).padStart(2, '0')}:${s}` : `${m}:${s}`;
}

/**
 * "00:01:02.350" (WebVTT) or "00:01:02,350" (SRT): hours have at least two digits; negative
 * and non-finite times are written as 0; milliseconds are rounded half up, as the server does.
 */
export function timestamp(seconds, separator = '.') {
  const clamped = Number.isFinite(seconds) ? Math.min(Math.max(seconds, 0), 3.6e9) : 0;
  const ms = Math.round(clamped * 1000);
  const h = Math.floor(ms / 3600000);
  const m = Math.floor(ms / 60000) % 60;
  const s = Math.floor(ms / 1000) % 60;
  const pad = (n, w = 2) => String(n).padStart(w, '0');
  return `${pad(h)}:${pad(m)}:${pad(s)}${separator}${pad(ms % 1000, 3)}`;
}

// Swift's Character.isWhitespace (Unicode White_Space), which is not quite JavaScript's \s.
const WHITESPACE = /[\t\n\v\f\r \u0085\u00a0\u1680\u2000-\u200a\u2028\u2029\u202f\u205f\u3000]+/u;
const ONLY_WHITESPACE = /^[\t\n\v\f\r \u0085\u00a0\u1680\u2000-\u200a\u2028\u2029\u202f\u205f\u3000]*$/u;

/** The words of `text`, split at whitespace (none for a blank text). */
function splitWords(text) {
  return String(text ?? '').split(WHITESPACE).filter((w) => w !== '');
}

const segmenter = typeof Intl !== 'undefined' && Intl.Segmenter ? new Intl.Segmenter(undefined, { granularity: 'grapheme' }) : null;

/** Characters as Swift counts them (grapheme clusters), which line lengths are measured in. */
function length(text) {
  // eslint-disable-next-line no-control-regex
  if (/^[\x00-\x7f]*$/.test(text)) return text.length;
  if (segmenter) {
    let n = 0;
    for (const _ of segmenter.segment(text)) n += 1;
    return n;
  }
  return [...text].length;
}

/** One final per line, `[00:00:01.200 → 00:00:02.480] hello world`, as the server writes it. */
export function toText(finals) {
  return finals.map((f) =>
    `[${timestamp(f.start)} → ${timestamp(f.end)}] ${splitWords(f.text).join(' ')}\n`).join('');
}

/**
 * The final's words with times: the text's words timed by `words` when the counts agree,
 * else `words` as they are, else the text's words timed by character position over the
 * final's range. The first starts at the final's start and the last ends at its end.
 */
function tokensOf(final) {
  const tokens = untrimmedTokensOf(final);
  if (tokens.length > 0) {
    tokens[0].start = final.start;
    const last = tokens[tokens.length - 1];
    last.end = Math.max(final.end, last.start);
  }
  return tokens;
}

function untrimmedTokensOf(final) {
  const textWords = splitWords(final.text);
  const timed = (Array.isArray(final.words) ? final.words : [])
    .filter((w) => w && typeof w.word === 'string' && !ONLY_WHITESPACE.test(w.word));
  if (timed.length > 0) {
    if (timed.length === textWords.length) {
      return textWords.map((text, i) => ({ text, start: timed[i].start, end: timed[i].end }));
    }
    return timed.flatMap((w) => splitWords(w.word).map((text) => ({ text, start: w.start, end: w.end })));
  }
  const total = textWords.reduce((n, w) => n + length(w), 0) + Math.max(0, textWords.length - 1);
  if (total <= 0) return [];
  const start = final.start;
  const span = Math.max(0, final.end - start);
  let offset = 0;
  return textWords.map((text) => {
    const n = length(text);
    const token = { text, start: start + (span * offset) / total, end: start + (span * (offset + n)) / total };
    offset += n + 1;
    return token;
  });
}

/** The rules of a layout, with CaptionLayout's bounds. */
function rulesOf(layout = CAPTION_LAYOUT) {
  const finite = (x) => typeof x === 'number' && Number.isFinite(x);
  const minDuration = finite(layout.minDuration) ? Math.min(Math.max(layout.minDuration, 0), 60) : CAPTION_LAYOUT.minDuration;
  const maxDuration = finite(layout.maxDuration)
    ? Math.min(Math.max(layout.maxDuration, minDuration, 0.001), 3600)
    : Math.max(CAPTION_LAYOUT.maxDuration, minDuration);
  return {
    maxLineLength: Math.max(1, layout.maxLineLength ?? CAPTION_LAYOUT.maxLineLength),
    maxLines: Math.max(1, layout.maxLines ?? CAPTION_LAYOUT.maxLines),
    minDuration,
    maxDuration,
  };
}

/**
 * Cuts finals into cues as they come: CaptionCueBuilder of Sources/StenoCore/CaptionCues.swift,
 * rule for rule (its comment says them). `add(final)` returns the cues settled; a short cue
 * waits for the next final, `settle(time)` or `finish()`.
 */
export class CueBuilder {
  constructor(layout = CAPTION_LAYOUT, after = 0) {
    this.rules = rulesOf(layout);
    this.floor = Number.isFinite(after) ? after : 0;
    this.pending = null;
  }

  add(final) {
    const tokens = tokensOf(final);
    if (tokens.length === 0) return [];
    const out = [];
    let current = null;
    if (this.pending) {
      const waiting = this.pending;
      this.pending = null;
      if (tokens[0].start >= waiting.start + this.rules.minDuration) out.push(this._close(waiting));
      else current = waiting;
    }
    for (const token of tokens) {
      if (current) {
        if (this._fits(token, current)) continue;
        out.push(this._close(current));
      }
      current = this._begin(token);
    }
    if (current) {
      if (current.end - current.start >= this.rules.minDuration) out.push(this._close(current));
      else this.pending = current;
    }
    return out;
  }

  settle(time) {
    const waiting = this.pending;
    if (!waiting || !(time >= waiting.start + this.rules.minDuration)) return [];
    this.pending = null;
    return [this._close(waiting)];
  }

  finish() {
    const waiting = this.pending;
    if (!waiting) return [];
    this.pending = null;
    return [this._close(waiting)];
  }

  _begin(token) {
    const start = Math.max(token.start, this.floor);
    return { tokens: [token], start, end: Math.max(token.end, start), linesUsed: 1, lineLength: length(token.text) };
  }

  _fits(token, cue) {
    if (!(token.end - cue.start <= this.rules.maxDuration)) return false;
    const n = length(token.text);
    if (cue.lineLength + 1 + n <= this.rules.maxLineLength) {
      cue.lineLength += 1 + n;
    } else if (cue.linesUsed < this.rules.maxLines) {
      cue.linesUsed += 1;
      cue.lineLength = n;
    } else {
      return false;
    }
    cue.tokens.push(token);
    cue.end = Math.max(cue.end, token.end);
    return true;
  }

  _close(cue) {
    let end = Math.max(cue.end, cue.start + this.rules.minDuration);
    end = Math.min(end, cue.start + this.rules.maxDuration);
    this.floor = end;
    return { start: cue.start, end, lines: lines(cue.tokens, this.rules) };
  }
}

/**
 * One cue's words as lines: one line if it fits (or is one word); with two lines, the break
 * that makes the longer line shortest, ties going to the shorter top line; otherwise greedy.
 */
function lines(tokens, { maxLineLength, maxLines }) {
  const words = tokens.map((t) => t.text);
  const oneLine = words.join(' ');
  const total = length(oneLine);
  if (total <= maxLineLength || words.length === 1) return [oneLine];
  if (maxLines === 2) {
    let split = 1;
    let bestLongest = Infinity;
    let topLength = -1;
    for (let candidate = 1; candidate < words.length; candidate++) {
      topLength += length(words[candidate - 1]) + 1;
      const longest = Math.max(topLength, total - topLength - 1);
      if (longest < bestLongest) {
        bestLongest = longest;
        split = candidate;
      }
    }
    return [words.slice(0, split).join(' '), words.slice(split).join(' ')];
  }
  const out = [];
  let line = '';
  for (const word of words) {
    if (line === '') line = word;
    else if (length(line) + 1 + length(word) <= maxLineLength) line += ` ${word}`;
    else {
      out.push(line);
      line = word;
    }
  }
  if (line !== '') out.push(line);
  return out;
}

/**
 * Splits finals into caption cues {start, end, lines} by the broadcast caption rules of
 * CueBuilder (Captions.swift's): in time order, never overlapping, each lasting from
 * `minDuration` to `maxDuration`; lines of whole words and at most `maxLineLength`
 * characters unless one word alone is longer, at most `maxLines`; two-line cues balanced.
 */
export function toCues(finals, layout = CAPTION_LAYOUT) {
  const builder = new CueBuilder(layout);
  const cues = [];
  for (const final of finals) cues.push(...builder.add(final));
  cues.push(...builder.finish());
  return cues;
}

function escapeVtt(line) {
  return line.replace(/&/g, '&amp;').replace(/</g, '&lt;').replace(/>/g, '&gt;');
}

/** WebVTT: `WEBVTT`, then each cue after a blank line (no cue numbers), as the server writes it. */
export function toWebVTT(finals, layout) {
  return `WEBVTT\n${toCues(finals, layout).map((cue) =>
    `\n${timestamp(cue.start)} --> ${timestamp(cue.end)}\n${cue.lines.map((l) => `${escapeVtt(l)}\n`).join('')}`).join('')}`;
}

/** SubRip (SRT): numbered cues separated by blank lines, as the server writes it. */
export function toSRT(finals, layout) {
  return toCues(finals, layout).map((cue, i) =>
    `${i + 1}\n${timestamp(cue.start, ',')} --> ${timestamp(cue.end, ',')}\n${cue.lines.map((l) => `${l}\n`).join('')}`).join('\n');
}
