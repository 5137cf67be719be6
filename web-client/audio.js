// Microphone capture for the Steno page: getUserMedia → AudioWorklet → Opus (WebCodecs
// AudioEncoder) or PCM s16le. Each encoded piece is handed to `onChunk` as
//   { data: ArrayBuffer, seconds: duration in s, t0: start on this capture's clock in s,
//     encoding: 'opus' | 'pcm_s16le' }.
// With `suppressSilence` (the default), pauses are left out by steno-client.js's
// SilenceSuppressor rules (SilenceGate): the pieces that are all silence are not handed on,
// and `onSilence({ seconds, t0 })` is called in their place, in order among the chunks.

import { SilenceGate, opusPacketSamples } from './steno-client.js';

export const OPUS_RATES = [8000, 12000, 16000, 24000, 48000];
const CHUNK_SECONDS = 0.02; // 20 ms: one Opus frame; small enough for low latency
const OPUS_BITRATE = 32000; // plenty for one voice

/** A sentence for a getUserMedia failure. */
export function describeMicrophoneError(error) {
  switch (error?.name) {
    case 'NotAllowedError':
      return 'Microphone access was blocked. Allow the microphone for this site, then press Start again.';
    case 'NotFoundError':
    case 'OverconstrainedError':
      return 'No microphone was found. Connect one, then press Start again.';
    case 'NotReadableError':
    case 'AbortError':
      return 'The microphone could not be opened; another application may be using it.';
    case 'SecurityError':
      return 'The microphone is only available on a secure page (https:// or localhost).';
    default:
      return `The microphone could not be started (${error?.message || error}).`;
  }
}

function opusConfig(sampleRate) {
  return {
    codec: 'opus',
    sampleRate,
    numberOfChannels: 1,
    bitrate: OPUS_BITRATE,
    // Raw packets (not Ogg), 20 ms each. No DTX: every 20 ms must arrive so that the
    // server's timeline, which counts samples, stays in step with the microphone (the packets
    // WebCodecs' DTX leaves out are not declared); pauses are left out by SilenceGate instead,
    // and declared.
    opus: { format: 'opus', frameDuration: 20000 },
  };
}

/** The Opus encoder configuration this browser supports at `sampleRate`, or null. */
async function supportedOpusConfig(sampleRate) {
  if (typeof AudioEncoder === 'undefined' || typeof AudioData === 'undefined') return null;
  for (const config of [opusConfig(sampleRate), { codec: 'opus', sampleRate, numberOfChannels: 1, bitrate: OPUS_BITRATE }]) {
    try {
      const { supported } = await AudioEncoder.isConfigSupported(config);
      if (supported) return config;
    } catch {
      // an invalid dictionary for this browser: try the plainer one
    }
  }
  return null;
}

/** Samples in -1…1 as 16-bit little-endian PCM. */
function pcmS16(samples) {
  const bytes = new ArrayBuffer(samples.length * 2);
  const view = new DataView(bytes);
  for (let i = 0; i < samples.length; i++) {
    const s = Math.max(-1, Math.min(1, samples[i]));
    view.setInt16(i * 2, s < 0 ? Math.round(s * 0x8000) : Math.round(s * 0x7fff), true);
  }
  return bytes;
}

export class MicrophoneCapture {
  /**
   * @param {object} o
   * @param {'auto'|'opus'|'pcm'} o.encoding  'auto' picks Opus where WebCodecs can encode it
   * @param {string} [o.pcmReason]  why PCM was asked for, shown with the format
   * @param {(chunk) => void} o.onChunk
   * @param {(peak: number) => void} [o.onLevel]  peak level 0…1 of each 20 ms
   * @param {() => void} [o.onEnded]  the microphone went away
   * @param {(message: string) => void} [o.onError]  the encoder failed
   * @param {boolean} [o.suppressSilence]  leave pauses out and declare them (default true)
   * @param {(silence: {seconds: number, t0: number}) => void} [o.onSilence]  a pause left out
   */
  constructor({ encoding = 'auto', pcmReason = 'forced in settings', onChunk, onLevel, onEnded, onError,
    suppressSilence = true, onSilence }) {
    this.requested = encoding;
    this.pcmReason = pcmReason;
    this.suppressSilence = suppressSilence;
    this.onSilence = onSilence || (() => {});
    this.silentSeconds = 0; // seconds of pauses left out so far
    this.onChunk = onChunk;
    this.onLevel = onLevel || (() => {});
    this.onEnded = onEnded || (() => {});
    this.onError = onError || (() => {});
    this.format = null;
    this.capturedSeconds = 0;
    this._frames = 0;
    this._stopped = false;
  }

  /** Opens the microphone and starts producing chunks. Resolves with the chosen format. */
  async start() {
    if (!navigator.mediaDevices?.getUserMedia) {
      const error = new Error('getUserMedia is not available');
      error.name = window.isSecureContext ? 'NotFoundError' : 'SecurityError';
      throw error;
    }
    // Raw audio: echo cancellation, noise suppression and gain control are tuned for calls
    // and change the sound in ways a recognizer was not trained on.
    this.stream = await navigator.mediaDevices.getUserMedia({
      audio: { channelCount: { ideal: 1 }, echoCancellation: false, noiseSuppression: false, autoGainControl: false },
    });
    try {
      await this._setUp();
    } catch (error) {
      await this.stop();
      throw error;
    }
    return this.format;
  }

  async _setUp() {
    const track = this.stream.getAudioTracks()[0];
    track.addEventListener('ended', () => { if (!this._stopped) this.onEnded(); });

    let context = new AudioContext({ latencyHint: 'interactive' });
    let opus = null;
    let reason = '';
    if (this.requested !== 'pcm') {
      // Opus at the context's rate when Opus has that rate, else at 48 kHz (the context
      // is recreated at 48 kHz so that the browser resamples, not this code).
      const rate = OPUS_RATES.includes(context.sampleRate) ? context.sampleRate : 48000;
      opus = await supportedOpusConfig(rate);
      if (opus && rate !== context.sampleRate) {
        await context.close();
        context = new AudioContext({ latencyHint: 'interactive', sampleRate: rate });
      }
      if (!opus) reason = typeof AudioEncoder === 'undefined' ? 'no WebCodecs in this browser' : 'Opus encoding not supported';
    } else {
      reason = this.pcmReason;
    }
    if (!opus && (context.sampleRate < 8000 || context.sampleRate > 48000)) {
      await context.close();
      context = new AudioContext({ latencyHint: 'interactive', sampleRate: 48000 });
    }
    this.context = context;
    const rate = context.sampleRate;
    this.format = opus
      ? { encoding: 'opus', sampleRate: rate, channels: 1, label: `Opus, ${rate / 1000} kHz mono (WebCodecs)` }
      : { encoding: 'pcm_s16le', sampleRate: rate, channels: 1, label: `PCM 16-bit, ${rate / 1000} kHz mono` };
    this.format.reason = reason;
    this._newGate();

    if (opus) {
      this.encoder = new AudioEncoder({
        output: (chunk) => this._onPacket(chunk),
        error: (error) => { if (!this._stopped) this.onError(`The Opus encoder failed: ${error.message}`); },
      });
      this.encoder.configure(opus);
    }

    await context.audioWorklet.addModule(new URL('./capture-worklet.js', import.meta.url));
    this.source = context.createMediaStreamSource(this.stream);
    this.node = new AudioWorkletNode(context, 'steno-capture', {
      numberOfInputs: 1,
      numberOfOutputs: 0,
      channelCount: 1,
      channelCountMode: 'explicit', // the graph downmixes a stereo microphone to mono
      channelInterpretation: 'speakers',
      processorOptions: { chunkFrames: Math.round(rate * CHUNK_SECONDS) },
    });
    this.node.port.onmessage = (event) => this._onSamples(event.data);
    this.source.connect(this.node);
    if (context.state !== 'running') await context.resume();
  }

  /**
   * A new gate from the current sample on (at the start, and when the format changes: what
   * the old one held is in the old format). Positions in it count from `_gateBase`.
   */
  _newGate() {
    this._gate = this.suppressSilence ? new SilenceGate(this.format.sampleRate) : null;
    this._gateBase = this._frames;
  }

  _onSamples(message) {
    if (message.flushed) {
      this._flushed?.();
      return;
    }
    const { samples, peak } = message;
    this.onLevel(peak);
    const rate = this.format.sampleRate;
    const t0 = this._frames / rate;
    const start = this._frames - this._gateBase;
    this._frames += samples.length;
    this.capturedSeconds = this._frames / rate;
    if (this.encoder) {
      if (this.encoder.state !== 'configured') return;
      // Every sample is encoded (the encoder's packets and their timestamps stay continuous);
      // the gate then holds each packet until it knows whether it is sent.
      this.encoder.encode(new AudioData({
        format: 'f32-planar',
        sampleRate: rate,
        numberOfFrames: samples.length,
        numberOfChannels: 1,
        timestamp: Math.round(t0 * 1e6),
        data: samples,
      }));
      if (this._gate) this._released(this._gate.judge(samples));
    } else {
      const chunk = { data: pcmS16(samples), seconds: samples.length / rate, t0, encoding: 'pcm_s16le' };
      if (!this._gate) {
        this.onChunk(chunk);
        return;
      }
      this._released(this._gate.piece(chunk, start, samples.length));
      this._released(this._gate.judge(samples));
    }
  }

  _onPacket(chunk) {
    if (!this.encoder) return; // switched to PCM meanwhile
    const bytes = new Uint8Array(chunk.byteLength);
    chunk.copyTo(bytes);
    const seconds = chunk.duration ? chunk.duration / 1e6 : opusPacketSamples(bytes) / 48000;
    const piece = { data: bytes.buffer, seconds, t0: chunk.timestamp / 1e6, encoding: 'opus' };
    if (!this._gate) {
      this.onChunk(piece);
      return;
    }
    const rate = this.format.sampleRate;
    this._released(this._gate.piece(piece, Math.round(piece.t0 * rate) - this._gateBase, Math.round(seconds * rate)));
  }

  /** What the gate lets through: chunks, and the pauses left out in their place. */
  _released(releases) {
    const rate = this.format.sampleRate;
    for (const release of releases) {
      if (release.send) {
        this.onChunk(release.send);
      } else {
        const seconds = release.length / rate;
        this.silentSeconds += seconds;
        this.onSilence({ seconds, t0: (this._gateBase + release.start) / rate });
      }
    }
  }

  /**
   * Goes on in PCM s16le at the same rate, without reopening the microphone (the server
   * refused Opus). Returns the new format.
   */
  usePcm(reason) {
    if (!this.encoder) return this.format;
    const encoder = this.encoder;
    this.encoder = null;
    try {
      encoder.close();
    } catch {
      // already closed by an error
    }
    const rate = this.format.sampleRate;
    this.format = { encoding: 'pcm_s16le', sampleRate: rate, channels: 1, label: `PCM 16-bit, ${rate / 1000} kHz mono`, reason };
    this._newGate(); // what the old gate held was Opus
    return this.format;
  }

  /** Stops the microphone. Audio captured so far (the worklet's partial chunk and the
   *  encoder's last packets) is delivered to onChunk before this resolves. */
  async stop() {
    if (this._stopped) return;
    this._stopped = true;
    if (this.node) {
      await new Promise((resolve) => {
        const timer = setTimeout(resolve, 1000); // never hang on a dead worklet
        this._flushed = () => { clearTimeout(timer); resolve(); };
        this.node.port.postMessage('flush');
      });
      this.node.port.postMessage('stop');
      this.source.disconnect();
    }
    for (const track of this.stream?.getTracks() || []) track.stop();
    if (this.encoder && this.encoder.state === 'configured') {
      try {
        await this.encoder.flush();
      } catch {
        // closed by an error: nothing more to deliver
      }
    }
    if (this._gate) this._released(this._gate.finish()); // what it held goes out, or is declared
    if (this.encoder && this.encoder.state !== 'closed') this.encoder.close();
    if (this.context && this.context.state !== 'closed') await this.context.close();
  }
}
