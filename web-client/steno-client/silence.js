// Part of steno-client.js, the module to import: leaving silence out — SilenceSuppressor
// (StenoAudio's, ported) and SilenceGate, its verdicts put on a sender's own pieces of audio.

/**
 * What a client streams when it leaves out silence: audio to send, or a stretch of silence to
 * declare instead (`silence`), so that the server's timeline stays that of the whole input
 * while a quiet client sends (almost) nothing. A port of `SilenceSuppressor` in StenoAudio
 * (Sources/StenoAudio/SilenceSuppressor.swift), with its rules and defaults:
 *
 * It keeps sending through pauses shorter than `hangover` plus `preroll` (the recognizer needs
 * ≈0.5 s of silence to end an utterance, and hears that silence as it would without
 * suppression), and before speech resumes it sends the last `preroll` of the silence again
 * (the recognizer's detector keeps 0.2 s from before speech starts, and a word's onset is
 * quiet). Loudness is judged per 10 ms frame against a noise floor it tracks itself (the
 * quietest recent frames), so it needs no setting for the microphone's level. What it leaves
 * out it declares as it goes: the first `declareAfter` of a pause at once (so the server knows
 * the pause is meant), then every `declareEvery` (a long pause does not look idle).
 *
 *   const suppressor = new SilenceSuppressor(48000);
 *   for (const out of suppressor.push(samples)) {       // Float32Array, any chunking
 *     if (out.type === 'audio') send(out.samples); else publisher.silence(out.seconds);
 *   }
 *   … suppressor.finish() at the end of the input (what is held goes out).
 */
export class SilenceSuppressor {
  constructor(sampleRate, { hangover = 0.8, preroll = 0.5, margin = 10, absoluteQuiet = -65,
    declareAfter = 0.1, declareEvery = 5 } = {}) {
    this.sampleRate = Math.max(1, Math.floor(sampleRate));
    Object.assign(this, { hangover, preroll, margin, absoluteQuiet, declareAfter, declareEvery });
    this._frameSamples = Math.max(1, Math.floor(this.sampleRate / 100));
    this._frame = new Float32Array(this._frameSamples);
    this._filled = 0;
    this._floor = null;
    this._quietFrames = 0; // quiet frames since the last loud one
    this._suppressing = false;
    this._held = []; // while suppressing: the last `preroll` of quiet frames
    this._skippedFrames = 0; // frames left out and not yet declared
    this._declaredInPause = false;
  }

  /** Whether it is leaving silence out now. */
  get isSuppressing() {
    return this._suppressing;
  }

  /** Takes samples; returns what to send or declare, in order: {type: 'audio', samples} or {type: 'silence', seconds}. */
  push(samples) {
    const out = [];
    const sending = [];
    for (let i = 0; i < samples.length; i++) {
      this._frame[this._filled++] = samples[i];
      if (this._filled === this._frameSamples) {
        this._take(this._frame.slice(), sending, out);
        this._filled = 0;
      }
    }
    if (sending.length) out.push({ type: 'audio', samples: concatFloats(sending) });
    return out;
  }

  /** End of input: what is held goes out (as silence while suppressing). */
  finish() {
    const out = [];
    if (this._suppressing) {
      const frames = this._skippedFrames + this._held.length;
      this._held = [];
      this._skippedFrames = 0;
      if (frames > 0) out.push({ type: 'silence', seconds: this._seconds(frames) });
      if (this._filled > 0) out.push({ type: 'silence', seconds: this._filled / this.sampleRate });
    } else if (this._filled > 0) {
      out.push({ type: 'audio', samples: this._frame.slice(0, this._filled) });
    }
    this._filled = 0;
    return out;
  }

  _take(frame, sending, out) {
    if (this._isLoud(frame)) {
      this._quietFrames = 0;
      if (this._suppressing) {
        // Speech again: declare what was left out, send the pre-roll, go on sending.
        this._suppressing = false;
        this._declaredInPause = false;
        if (this._skippedFrames > 0) out.push({ type: 'silence', seconds: this._seconds(this._skippedFrames) });
        this._skippedFrames = 0;
        sending.length = 0;
        sending.push(...this._held);
        this._held = [];
      }
      sending.push(frame);
      return;
    }
    this._quietFrames += 1;
    if (!this._suppressing && this._quietFrames * 0.01 > this.hangover + this.preroll) {
      this._suppressing = true;
      if (sending.length) {
        out.push({ type: 'audio', samples: concatFloats(sending) });
        sending.length = 0;
      }
    }
    if (!this._suppressing) {
      sending.push(frame);
      return;
    }
    this._held.push(frame);
    const keep = Math.round(this.preroll * 100);
    if (this._held.length > keep) {
      this._held.splice(0, this._held.length - keep);
      this._skippedFrames += 1;
      // Declared as it goes: soon after the pause begins, then now and then.
      const due = Math.max(1, Math.round((this._declaredInPause ? this.declareEvery : this.declareAfter) * 100));
      if (this._skippedFrames >= due) {
        out.push({ type: 'silence', seconds: this._seconds(this._skippedFrames) });
        this._skippedFrames = 0;
        this._declaredInPause = true;
      }
    }
  }

  _isLoud(frame) {
    let energy = 0;
    for (let i = 0; i < frame.length; i++) energy += frame[i] * frame[i];
    const rms = Math.sqrt(energy / frame.length);
    const level = rms > 0 ? 20 * Math.log10(rms) : -200;
    // The floor follows the quietest frames down at once and rises slowly (5 dB/s).
    const current = this._floor ?? level;
    this._floor = level < current ? level : current + 0.05;
    return level >= this.absoluteQuiet && level >= this._floor + this.margin;
  }

  _seconds(frames) {
    return (frames * this._frameSamples) / this.sampleRate;
  }
}

/**
 * SilenceSuppressor's verdicts put on a sender's own pieces of audio (PCM chunks, Opus
 * packets), as `steno send` does (Sources/steno/Client/SilenceGate.swift): a piece that holds
 * any audio is sent whole, a piece that is all silence is left out, and a run of pieces left
 * out is declared as one silence of exactly their length. Pieces wait until the suppressor has
 * judged all of their samples. Positions and lengths are in samples of one channel.
 *
 *   gate.judge(samples)                       the captured samples, in order (mono)
 *   gate.piece(payload, start, length)        a piece to send for samples [start, start+length)
 *   gate.finish()                             end of input: everything is released
 * Each returns what to do now, in order: {send: payload, start, length} or {silence: true, start, length}.
 */
export class SilenceGate {
  constructor(sampleRate, options = {}) {
    this.sampleRate = sampleRate;
    this._suppressor = new SilenceSuppressor(sampleRate, options);
    this._waiting = [];
    this._audio = []; // judged spans of audio [from, to) not yet behind every piece
    this._judged = 0;
    this._silence = null; // {start, length}: pieces left out, not yet declared
  }

  judge(samples) {
    this._apply(this._suppressor.push(samples));
    return this._release(false);
  }

  piece(payload, start, length) {
    this._waiting.push({ payload, start, length });
    return this._release(false);
  }

  finish() {
    this._apply(this._suppressor.finish());
    return this._release(true);
  }

  _apply(outputs) {
    for (const output of outputs) {
      if (output.type === 'audio') {
        const from = this._judged;
        this._judged += output.samples.length;
        const last = this._audio.at(-1);
        if (last && last.to === from) last.to = this._judged;
        else this._audio.push({ from, to: this._judged });
      } else {
        this._judged += Math.round(output.seconds * this.sampleRate);
      }
    }
  }

  _release(all) {
    const out = [];
    while (this._waiting.length && (all || this._waiting[0].start + this._waiting[0].length <= this._judged)) {
      const piece = this._waiting.shift();
      const end = piece.start + piece.length;
      while (this._audio.length && this._audio[0].to <= piece.start) this._audio.shift();
      const audio = piece.length === 0 || this._audio.some((span) => span.from < end && span.to > piece.start);
      if (audio) {
        this._declare(out);
        out.push({ send: piece.payload, start: piece.start, length: piece.length });
      } else if (this._silence) {
        this._silence.length = end - this._silence.start;
      } else {
        this._silence = { start: piece.start, length: piece.length };
      }
    }
    // What was left out is declared as soon as it is known to be silence.
    this._declare(out);
    return out;
  }

  _declare(out) {
    if (!this._silence) return;
    out.push({ silence: true, start: this._silence.start, length: this._silence.length });
    this._silence = null;
  }
}

function concatFloats(frames) {
  const out = new Float32Array(frames.reduce((n, f) => n + f.length, 0));
  let offset = 0;
  for (const f of frames) {
    out.set(f, offset);
    offset += f.length;
  }
  return out;
}
