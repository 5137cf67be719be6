// Microphone capture for the Steno page: getUserMedia → AudioWorklet → Opus (WebCodecs
// AudioEncoder) or PCM s16le. Each encoded piece is handed to `onChunk` as
//   { data: ArrayBuffer, seconds: duration in s, t0: start on this capture's clock in s,
//     encoding: 'opus' | 'pcm_s16le' }.

import { opusPacketSamples } from './steno-client.js';

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
    // server's timeline, which counts samples, stays in step with the microphone.
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

export class MicrophoneCapture {
  /**
   * @param {object} o
   * @param {'auto'|'opus'|'pcm'} o.encoding  'auto' picks Opus where WebCodecs can encode it
   * @param {string} [o.pcmReason]  why PCM was asked for, shown with the format
   * @param {(chunk) => void} o.onChunk
   * @param {(peak: number) => void} [o.onLevel]  peak level 0…1 of each 20 ms
   * @param {() => void} [o.onEnded]  the microphone went away
   * @param {(message: string) => void} [o.onError]  the encoder failed
   */
  constructor({ encoding = 'auto', pcmReason = 'forced in settings', onChunk, onLevel, onEnded, onError }) {
    this.requested = encoding;
    this.pcmReason = pcmReason;
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

  _onSamples(message) {
    if (message.flushed) {
      this._flushed?.();
      return;
    }
    const { samples, peak } = message;
    this.onLevel(peak);
    const rate = this.format.sampleRate;
    const t0 = this._frames / rate;
    this._frames += samples.length;
    this.capturedSeconds = this._frames / rate;
    if (this.encoder) {
      if (this.encoder.state !== 'configured') return;
      this.encoder.encode(new AudioData({
        format: 'f32-planar',
        sampleRate: rate,
        numberOfFrames: samples.length,
        numberOfChannels: 1,
        timestamp: Math.round(t0 * 1e6),
        data: samples,
      }));
    } else {
      const bytes = new ArrayBuffer(samples.length * 2);
      const view = new DataView(bytes);
      for (let i = 0; i < samples.length; i++) {
        const s = Math.max(-1, Math.min(1, samples[i]));
        view.setInt16(i * 2, s < 0 ? Math.round(s * 0x8000) : Math.round(s * 0x7fff), true);
      }
      this.onChunk({ data: bytes, seconds: samples.length / rate, t0, encoding: 'pcm_s16le' });
    }
  }

  _onPacket(chunk) {
    if (!this.encoder) return; // switched to PCM meanwhile
    const bytes = new Uint8Array(chunk.byteLength);
    chunk.copyTo(bytes);
    const seconds = chunk.duration ? chunk.duration / 1e6 : opusPacketSamples(bytes) / 48000;
    this.onChunk({ data: bytes.buffer, seconds, t0: chunk.timestamp / 1e6, encoding: 'opus' });
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
    if (this.encoder && this.encoder.state !== 'closed') this.encoder.close();
    if (this.context && this.context.state !== 'closed') await this.context.close();
  }
}
