// StenoAudio: audio ingest for a session.
//
// - `PCMConverter`: pcm_s16le / pcm_f32le bytes → mono Float (downmix, sanitizing).
// - `OpusDecoder`: one Opus packet per call (durations from StenoCore's `OpusPacket`) → mono Float, with concealment.
// - `Resampler`: streaming soxr HQ resampling, delay-free alignment, exact totals.
// - `AudioClock`: sample counts on both sides of the resampler ↔ session seconds.
// - `AudioIngest`: the above tied together; what the session pipeline calls.
// - `WAVFile`: reads and writes small RIFF/WAVE files for tests, benchmarks and tools.
