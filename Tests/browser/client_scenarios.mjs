// Scenarios for steno-client.js against a real server, shared by the browser test (loaded
// into a page through a Playwright route) and the Node test (client_node.mjs). Each returns
// a JSON-serializable summary; the Python tests make the assertions.

/** Parses a PCM WAV file: {sampleRate, channels, bitsPerSample, data: Uint8Array}. */
export function parseWav(bytes) {
  const view = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  const tag = (offset) => String.fromCharCode(...bytes.subarray(offset, offset + 4));
  if (tag(0) !== 'RIFF' || tag(8) !== 'WAVE') throw new Error('not a WAV file');
  let format = null;
  let offset = 12;
  while (offset + 8 <= bytes.length) {
    const id = tag(offset);
    const size = view.getUint32(offset + 4, true);
    const body = offset + 8;
    if (id === 'fmt ') {
      format = {
        audioFormat: view.getUint16(body, true),
        channels: view.getUint16(body + 2, true),
        sampleRate: view.getUint32(body + 4, true),
        bitsPerSample: view.getUint16(body + 14, true),
      };
    } else if (id === 'data') {
      if (!format) throw new Error('WAV data before fmt');
      return { ...format, data: bytes.subarray(body, body + size) };
    }
    offset = body + size + (size & 1);
  }
  throw new Error('WAV without data');
}

function recorder(client) {
  const byCallback = [];
  client.on('event', (event) => byCallback.push(event));
  const byIterator = [];
  let iteratorError = null;
  const iterating = (async () => {
    try {
      for await (const event of client) byIterator.push(event);
    } catch (error) {
      iteratorError = { name: error.name, code: error.code, closeCode: error.closeCode };
    }
  })();
  return { byCallback, byIterator, iterating, iteratorError: () => iteratorError };
}

function errorSummary(error) {
  return error ? { name: error.name, code: error.code, closeCode: error.closeCode, message: error.message } : null;
}

/**
 * Streams a WAV file as PCM as fast as the socket takes it, in pieces of odd byte sizes and
 * of several types (the client must re-cut them into whole samples), then finalize() and end().
 */
export async function streamFile(StenoClient, url, wavBytes) {
  const wav = parseWav(wavBytes);
  if (wav.audioFormat !== 1 || wav.bitsPerSample !== 16) throw new Error('need 16-bit PCM');
  const client = new StenoClient(url, {
    audio: { encoding: 'pcm_s16le', sampleRate: wav.sampleRate, channels: wav.channels },
    language: 'en-US',
  });
  const finalsByCallback = [];
  client.on('final', (event) => finalsByCallback.push(event));
  const rec = recorder(client);

  const ready = await client.start();
  const stateAfterReady = client.state;

  // Pieces: ArrayBuffer, Int16Array and odd-sized Uint8Array views, in turn.
  const pieceBytes = [3201, 4000, 1999];
  let offset = 0;
  let index = 0;
  while (offset < wav.data.length) {
    const size = Math.min(pieceBytes[index % pieceBytes.length], wav.data.length - offset);
    const piece = wav.data.slice(offset, offset + size);
    if (index % 3 === 0) client.sendAudio(piece.buffer);
    else if (index % 3 === 1 && size % 2 === 0) client.sendAudio(new Int16Array(piece.buffer));
    else client.sendAudio(piece);
    offset += size;
    index += 1;
  }
  const sentSeconds = client.sentSeconds;
  const finalized = await client.finalize();
  const ended = await client.end();
  const closed = await client.closed;
  await rec.iterating;

  return {
    ready,
    stateAfterReady,
    sentSeconds,
    wavSeconds: wav.data.length / 2 / wav.channels / wav.sampleRate,
    finalized,
    ended,
    closed: { code: closed.code, wasClean: closed.wasClean, error: errorSummary(closed.error) },
    finals: finalsByCallback.map(({ start, end, text, seq }) => ({ start, end, text, seq })),
    events: rec.byCallback.map((e) => ({ type: e.type, seq: e.seq, code: e.code })),
    iteratorEvents: rec.byIterator.map((e) => ({ type: e.type, seq: e.seq })),
    iteratorError: rec.iteratorError(),
    stateAtEnd: client.state,
  };
}

/** A `start` the server must refuse: start() rejects with unsupported_audio and close 1003. */
export async function unsupportedAudio(StenoClient, url) {
  const client = new StenoClient(url, { audio: { encoding: 'pcm_s16le', sampleRate: 1234, channels: 1 } });
  const rec = recorder(client);
  let rejected = null;
  let accepted = null;
  try {
    accepted = await client.start();
    client.close(); // a server that accepts it fails the test; do not hang on it
  } catch (error) {
    rejected = errorSummary(error);
  }
  const closed = await client.closed;
  await rec.iterating;
  let afterClose = null;
  try {
    await client.finalize();
  } catch (error) {
    afterClose = errorSummary(error);
  }
  return {
    accepted,
    rejected,
    closed: { code: closed.code, error: errorSummary(closed.error) },
    events: rec.byCallback.map((e) => ({ type: e.type, code: e.code, fatal: e.fatal })),
    iteratorError: rec.iteratorError(),
    afterClose,
  };
}

/** Some audio, then cancel(): resolves on `cancelled` and the socket closes normally. */
export async function cancelSession(StenoClient, url, wavBytes) {
  const wav = parseWav(wavBytes);
  const client = new StenoClient(url, {
    audio: { encoding: 'pcm_s16le', sampleRate: wav.sampleRate, channels: wav.channels },
  });
  const rec = recorder(client);
  client.sendAudio(wav.data.slice(0, wav.sampleRate * 2 * 3)); // 3 s, queued until ready
  const ready = await client.start();
  const cancelled = await client.cancel();
  const closed = await client.closed;
  await rec.iterating;
  return {
    session: ready.session,
    cancelled,
    closed: { code: closed.code, error: errorSummary(closed.error) },
    types: rec.byCallback.map((e) => e.type),
    iteratorError: rec.iteratorError(),
  };
}

/**
 * 16-bit mono PCM with its longest quiet stretch (inside the file, in 10 ms frames) made
 * `seconds` longer: a pause long enough for a new paragraph, wherever the file has one.
 */
export function stretchLongestPause(data, sampleRate, seconds) {
  const samples = new Int16Array(data.buffer.slice(data.byteOffset, data.byteOffset + data.byteLength));
  const frame = Math.round(sampleRate / 100);
  const quiet = [];
  for (let i = 0; i + frame <= samples.length; i += frame) {
    let sum = 0;
    for (let j = i; j < i + frame; j++) sum += samples[j] * samples[j];
    quiet.push(Math.sqrt(sum / frame) < 300);
  }
  const firstLoud = quiet.indexOf(false);
  const lastLoud = quiet.lastIndexOf(false);
  let best = null;
  for (let i = firstLoud, run = 0; i <= lastLoud; i++) {
    run = quiet[i] ? run + 1 : 0;
    if (run > 0 && (!best || run > best.length)) best = { end: i + 1, length: run };
  }
  if (!best) throw new Error('no pause in the file');
  const at = (best.end - Math.floor(best.length / 2)) * frame;
  const out = new Int16Array(samples.length + Math.round(seconds * sampleRate));
  out.set(samples.subarray(0, at));
  out.set(samples.subarray(at), at + Math.round(seconds * sampleRate));
  return new Uint8Array(out.buffer);
}

/**
 * Publishes a WAV file to a broadcast channel, paced at `speed` times real time in 100 ms
 * pieces (so viewers see volatile results as well as finals), then finalize() and end().
 * `longerPause` seconds are added to the file's longest pause.
 */
export async function publishFile(StenoClient, url, wavBytes, channel, speed = 2, longerPause = 0, times = 1) {
  const parsed = parseWav(wavBytes);
  const once = longerPause > 0 ? stretchLongestPause(parsed.data, parsed.sampleRate, longerPause) : parsed.data;
  const data = new Uint8Array(once.length * times);
  for (let i = 0; i < times; i++) data.set(once, i * once.length);
  const wav = { ...parsed, data };
  const client = new StenoClient(url, {
    audio: { encoding: 'pcm_s16le', sampleRate: wav.sampleRate, channels: wav.channels },
    channel,
  });
  const finals = [];
  const errors = [];
  client.on('final', ({ start, end, text }) => finals.push({ start, end, text }));
  client.on('error', ({ code, message }) => errors.push({ code, message }));
  const ready = await client.start();
  const piece = Math.round(wav.sampleRate / 10) * 2 * wav.channels;
  for (let offset = 0; offset < wav.data.length; offset += piece) {
    client.sendAudio(wav.data.slice(offset, offset + piece));
    await new Promise((resolve) => setTimeout(resolve, 100 / speed));
  }
  await client.finalize();
  const ended = await client.end();
  await client.closed;
  return { ready, ended, finals, errors };
}
