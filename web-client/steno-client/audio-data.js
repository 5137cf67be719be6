// Part of steno-client.js, the module to import: audio as the bytes that are sent — an Opus
// packet's duration as the server reads it, PCM from samples, bytes from what sendAudio takes.

/** The longest Opus packet RFC 6716 allows: 120 ms, in 48 kHz samples. */
export const OPUS_MAX_PACKET_SAMPLES = 5760;

/**
 * Samples at 48 kHz held by one Opus packet, from its TOC byte (RFC 6716, section 3.1),
 * or 0 if the header is malformed: an empty packet, code 3 without its frame-count byte or
 * with 0 frames, or more than 120 ms in all. The same rule as the server's (OpusPacket.swift).
 */
export function opusPacketSamples(bytes) {
  if (!bytes || bytes.length < 1) return 0;
  const toc = bytes[0];
  const config = toc >> 3;
  let frame; // samples at 48 kHz per frame
  if (config < 12) frame = [480, 960, 1920, 2880][config & 3]; // SILK: 10, 20, 40, 60 ms
  else if (config < 16) frame = (config & 1) ? 960 : 480; // hybrid: 10, 20 ms
  else frame = [120, 240, 480, 960][config & 3]; // CELT: 2.5, 5, 10, 20 ms
  const code = toc & 3;
  let frames;
  if (code === 0) frames = 1;
  else if (code === 1 || code === 2) frames = 2;
  else {
    if (bytes.length < 2) return 0;
    frames = bytes[1] & 0x3f;
  }
  const total = frames * frame;
  return total <= OPUS_MAX_PACKET_SAMPLES ? total : 0;
}

const BYTES_PER_SAMPLE = { pcm_s16le: 2, pcm_f32le: 4 };

export function toBytes(data, encoding) {
  if (data instanceof ArrayBuffer) return new Uint8Array(data);
  if (ArrayBuffer.isView(data)) return new Uint8Array(data.buffer, data.byteOffset, data.byteLength);
  if (typeof EncodedAudioChunk !== 'undefined' && data instanceof EncodedAudioChunk) {
    const bytes = new Uint8Array(data.byteLength);
    data.copyTo(bytes);
    return bytes;
  }
  throw new TypeError(`sendAudio: expected an ArrayBuffer, typed array or EncodedAudioChunk for ${encoding}`);
}

function floatToPcm(samples, encoding) {
  if (encoding === 'pcm_f32le') {
    const out = new Uint8Array(samples.length * 4);
    const view = new DataView(out.buffer);
    for (let i = 0; i < samples.length; i++) view.setFloat32(i * 4, samples[i], true);
    return out;
  }
  if (encoding !== 'pcm_s16le') throw new TypeError(`sendAudio: Float32Array samples cannot be sent as ${encoding}`);
  const out = new Uint8Array(samples.length * 2);
  const view = new DataView(out.buffer);
  for (let i = 0; i < samples.length; i++) {
    const s = Math.max(-1, Math.min(1, samples[i]));
    view.setInt16(i * 2, s < 0 ? Math.round(s * 0x8000) : Math.round(s * 0x7fff), true);
  }
  return out;
}

/**
 * PCM to send: `data` (samples or bytes) after `carry`, the partial sample frame the last piece
 * left, cut into copies of whole frames of at most `maxFrameBytes` each (StenoClient and
 * StenoPublisher send the same messages). {pieces, frameBytes, carry}: carry is the partial
 * frame at the end, to go before the next piece (null for none).
 */
export function pcmPieces(data, encoding, channels, carry, maxFrameBytes) {
  let bytes = data instanceof Float32Array ? floatToPcm(data, encoding) : toBytes(data, encoding);
  if (carry) {
    const joined = new Uint8Array(carry.length + bytes.length);
    joined.set(carry);
    joined.set(bytes, carry.length);
    bytes = joined;
  }
  const frameBytes = (BYTES_PER_SAMPLE[encoding] || 2) * channels;
  const whole = bytes.length - (bytes.length % frameBytes);
  const maxBytes = Math.max(frameBytes, maxFrameBytes - (maxFrameBytes % frameBytes));
  const pieces = [];
  for (let offset = 0; offset < whole; offset += maxBytes) pieces.push(bytes.slice(offset, Math.min(whole, offset + maxBytes)));
  return { pieces, frameBytes, carry: whole < bytes.length ? bytes.slice(whole) : null };
}
