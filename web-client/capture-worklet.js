// AudioWorklet processor: collects the microphone's (already mono) samples into chunks of a
// fixed number of frames and posts each chunk, with its peak level, to the main thread.
// Loaded with audioWorklet.addModule(); registered as 'steno-capture'.

class StenoCaptureProcessor extends AudioWorkletProcessor {
  constructor(options) {
    super();
    const frames = options?.processorOptions?.chunkFrames;
    this.chunkFrames = Number.isInteger(frames) && frames > 0 ? frames : 960;
    this.buffer = new Float32Array(this.chunkFrames);
    this.filled = 0;
    this.peak = 0;
    this.active = true;
    this.port.onmessage = (event) => {
      if (event.data === 'flush') {
        // The last chunk, and nothing after it: the page stops the microphone once it has
        // this, and a chunk posted meanwhile would arrive after the session was told so.
        this.post();
        this.active = false;
        this.port.postMessage({ flushed: true });
      } else if (event.data === 'stop') {
        this.active = false;
      }
    };
  }

  post() {
    if (this.filled === 0) return;
    const samples = this.buffer.slice(0, this.filled);
    this.port.postMessage({ samples, peak: this.peak }, [samples.buffer]);
    this.filled = 0;
    this.peak = 0;
  }

  process(inputs) {
    if (!this.active) return false;
    const input = inputs[0];
    // No input connected yet (or the source ended): keep the node alive, send nothing.
    if (!input || input.length === 0) return true;
    let channel = input[0];
    if (input.length > 1) {
      // The node is configured for one channel; downmix anyway if a browser ignores that.
      const mixed = new Float32Array(channel.length);
      for (const data of input) for (let i = 0; i < data.length; i++) mixed[i] += data[i] / input.length;
      channel = mixed;
    }
    let offset = 0;
    while (offset < channel.length) {
      const n = Math.min(channel.length - offset, this.chunkFrames - this.filled);
      for (let i = 0; i < n; i++) {
        const s = channel[offset + i];
        this.buffer[this.filled + i] = s;
        const a = s < 0 ? -s : s;
        if (a > this.peak) this.peak = a;
      }
      this.filled += n;
      offset += n;
      if (this.filled === this.chunkFrames) this.post();
    }
    return true;
  }
}

registerProcessor('steno-capture', StenoCaptureProcessor);
