// StenoSpeech: speech recognition behind a small protocol.
//
// - `SpeechEngine` (Sendable, one per server) makes a `SpeechRecognizer` per session.
//   A recognizer takes 16 kHz mono Float samples and returns `TranscriberEvent`s
//   (`.volatile`, `.final`, `.speechStarted`, `.speechEnded`) in seconds from its first sample.
//   Another engine (Vosk, whisper.cpp, sherpa-onnx, SpeechAnalyzer) fits the same two protocols.
// - `PocketSphinxEngine` / `PocketSphinxRecognizer`: pocketsphinx 5prealpha (Debian
//   0.8+5prealpha+1) with the en-us model. `PocketSphinxSpeechDetector`: its voice activity
//   detector alone.
//
// Decisions, and what they rest on (measured on this project's machine; the benchmark
// `steno-bench speech` prints the tables):
//
// Decoders. ps_init costs ≈0.55 s and ≈97 MB per decoder, and a decoder keeps state across
// streams: the live cepstral mean (a running sum and count, and a type switched from the
// model's `batch` to `live` on first use) and the front end's noise estimates. After other
// audio the same file gives different words. `ps_start_stream` resets the noise estimates and
// the sample counter; restoring the CMN mean, sum, count and type captured right after
// ps_init restores the rest: words, frames and posteriors then equal a fresh decoder's
// (checked in C on 36 runs and in the tests). So decoders are pooled: a finished session's
// decoder is reset that way (≈0.1 ms) and reused; a pool can also keep decoders made ahead in
// the background. ps_reinit would reload the model (as slow as ps_init). Each decoder has its
// own language model: search writes the LM's caches, so one LM must not serve two decoders
// running at once.
//
// Blocks. The recognizer buffers input into 2048-sample blocks counted from the start of the
// utterance and calls `ps_process_raw` once per block, checks `ps_get_in_speech` after each
// block, and ends the utterance when it goes from speech to silence: the loop of
// `pocketsphinx_continuous -infile`, so the finals have the CLI's words and posteriors
// exactly (tests), and chunking by callers cannot change anything. Smaller endpointing
// blocks (160 samples) ended utterances elsewhere and changed later utterances' words.
//
// Times. pocketsphinx's VAD drops silence frames and `ps_seg_frames` adds an offset estimated
// from a global sample counter: off by one frame, by up to 20 frames when speech is detected
// less than 0.2 s after an utterance starts (the CLI prints such words before the utterance
// even began), and stale when the estimate is ≤ 0. The recognizer keeps its own account (see
// `PocketSphinxRecognizer`), with a second front end fed 10 ms at a time to know the exact
// frame where speech was detected (feeding the decoder itself 10 ms at a time changed the
// posteriors slightly and made them depend on the decoder's history). 5 s of leading
// silence moves every word by exactly 5 s.
//
// Options. Steno's default adds `-maxhmmpf 5000 -maxwpf 20 -fwdflat no` to pocketsphinx's
// defaults: tighter pruning and no second pass, fewer word errors on the benchmark's sets at
// about half the CPU, and an end of utterance that no longer reruns the search over the whole
// utterance (see `PocketSphinxConfiguration.recommendedArguments`). The streaming recognizer
// equals the CLI run with the same options, whatever they are.
//
// Confidence. `ps_seg_prob` in this version is the word's posterior probability in the
// final lattice (`-bestpath yes`, the default), as a log in the decoder's logmath base;
// `logmath_exp` turns it into 0...1, the number the CLI prints with `-time yes`. It is
// meaningful: on the test files, correct words average 0.69, wrong ones 0.41. Partial
// results have no lattice yet: their words report confidence 0.
//
// Threads. A recognizer is used by one thread at a time. Decoders are made and freed under
// one process-wide lock (ps_init writes sphinxbase globals; configuration reference counts
// are not atomic). sphinxbase logging is process-wide: silenced by default, to a file with
// `PocketSphinxEngine.setLogFile` (a C shim installs the log callback, a variadic type
// Swift cannot implement, and keeps each thread's errors for `StenoError` messages).
