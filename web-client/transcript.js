// Transcript exports built from final results: plain text, WebVTT and SRT.
// A final is { start, end, text, words? } with times in seconds.

const MAX_LINE = 42; // characters per caption line, the usual broadcast guideline
const MAX_LINES = 2;

/** "1:02.35" for a short label (hover titles, the status line). */
export function shortTime(seconds) {
  const cs = Math.max(0, Math.round(seconds * 100));
  const m = Math.floor(cs / 6000);
  const s = (cs % 6000) / 100;
  return `${m}:${s.toFixed(2).padStart(5, '0')}`;
}

/** "00:01:02.350" (WebVTT) or "00:01:02,350" (SRT). */
export function timestamp(seconds, separator = '.') {
  const ms = Math.max(0, Math.round(seconds * 1000));
  const h = Math.floor(ms / 3600000);
  const m = Math.floor(ms / 60000) % 60;
  const s = Math.floor(ms / 1000) % 60;
  const pad = (n, w = 2) => String(n).padStart(w, '0');
  return `${pad(h)}:${pad(m)}:${pad(s)}${separator}${pad(ms % 1000, 3)}`;
}

/** The transcript as plain text: one final (one utterance) per line. */
export function toText(finals) {
  const lines = finals.map((f) => f.text.trim()).filter(Boolean);
  return lines.length ? lines.join('\n') + '\n' : '';
}

/** Wraps words into lines of at most MAX_LINE characters (a longer word gets its own line). */
function wrap(words) {
  const lines = [];
  let line = '';
  for (const word of words) {
    if (line && line.length + 1 + word.length > MAX_LINE) {
      lines.push(line);
      line = word;
    } else {
      line = line ? `${line} ${word}` : word;
    }
  }
  if (line) lines.push(line);
  return lines;
}

/**
 * Splits finals into caption cues of at most two lines of 42 characters. Word timings are
 * used where the final has them; otherwise the final's time range is shared out in
 * proportion to the characters of each cue.
 */
export function toCues(finals) {
  const cues = [];
  for (const final of finals) {
    const text = final.text.trim();
    if (!text) continue;
    const timed = Array.isArray(final.words) && final.words.length > 0 &&
      final.words.every((w) => typeof w.word === 'string' && typeof w.start === 'number' && typeof w.end === 'number');
    const tokens = timed
      ? final.words.map((w) => ({ word: w.word.trim(), start: w.start, end: w.end })).filter((w) => w.word)
      : text.split(/\s+/).map((word) => ({ word }));
    // Group tokens into cues that fit in MAX_LINES wrapped lines.
    const groups = [];
    let current = [];
    for (const token of tokens) {
      const candidate = [...current, token];
      if (current.length && wrap(candidate.map((t) => t.word)).length > MAX_LINES) {
        groups.push(current);
        current = [token];
      } else {
        current = candidate;
      }
    }
    if (current.length) groups.push(current);

    const totalChars = groups.reduce((n, g) => n + g.map((t) => t.word).join(' ').length, 0) || 1;
    let cursor = final.start;
    groups.forEach((group, index) => {
      const words = group.map((t) => t.word);
      let start, end;
      if (timed) {
        start = index === 0 ? final.start : group[0].start;
        end = index === groups.length - 1 ? final.end : groups[index + 1][0].start;
      } else {
        const share = words.join(' ').length / totalChars;
        start = cursor;
        end = index === groups.length - 1 ? final.end : cursor + share * (final.end - final.start);
      }
      cursor = end;
      cues.push({ start, end, lines: wrap(words) });
    });
  }
  // Cues must not run backwards or overlap, and each must last at least one millisecond.
  for (let i = 0; i < cues.length; i++) {
    const cue = cues[i];
    if (i > 0) cue.start = Math.max(cue.start, cues[i - 1].end);
    cue.end = Math.max(cue.end, cue.start + 0.001);
  }
  return cues;
}

function escapeVtt(line) {
  return line.replace(/&/g, '&amp;').replace(/</g, '&lt;').replace(/>/g, '&gt;');
}

/** WebVTT captions. */
export function toWebVTT(finals) {
  const blocks = toCues(finals).map((cue, i) =>
    `${i + 1}\n${timestamp(cue.start)} --> ${timestamp(cue.end)}\n${cue.lines.map(escapeVtt).join('\n')}`);
  return `WEBVTT\n\n${blocks.map((b) => `${b}\n\n`).join('')}`;
}

/** SubRip (SRT) captions. */
export function toSRT(finals) {
  return toCues(finals).map((cue, i) =>
    `${i + 1}\n${timestamp(cue.start, ',')} --> ${timestamp(cue.end, ',')}\n${cue.lines.join('\n')}\n\n`).join('');
}
