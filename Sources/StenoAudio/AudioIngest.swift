import StenoCore

/// One session's audio ingest: the bytes of each binary message in, mono `Float` samples at
/// the recognizer's rate (16 kHz) out, with the clock and counters the session reports.
///
/// - PCM (`pcm_s16le`, `pcm_f32le`, 8–48 kHz, mono or stereo): `PCMConverter` then
///   `Resampler` (a plain copy when the rate already matches). A message that is not a whole
///   number of sample frames throws `bad_audio` and changes nothing.
/// - Opus: one packet per message, decoded by `OpusDecoder`. By default (`.direct`) libopus
///   decodes straight at the output rate, whatever rate the stream was encoded at; `.resampled`
///   decodes at the declared rate and resamples with soxr. Direct is the default because it
///   costs less CPU and gave the same recognized words or better (figures at `OpusPath`). An undecodable packet never throws: it is concealed with the right length,
///   counted in `concealedPackets`, and reported in `Report.concealment` as a non-fatal
///   `bad_audio` the session may pass on to the client.
///
/// Every sample it hands out is finite and within -1...1 (see `clamp`), so a consumer may
/// scale it to 16-bit integers without checks.
///
/// Not `Sendable`: one session owns it and calls it from one thread at a time.
public final class AudioIngest {
    /// How Opus is brought to the output rate.
    ///
    /// `.direct` is the default. Measured on this project's machine with speech encoded by
    /// libopus (VOIP, 32 kbit/s, 20 ms packets) at each Opus rate, 12 files (librivox, cards,
    /// Beckett), pocketsphinx en-us on the 16 kHz result:
    /// - CPU per audio second (`steno-bench audio`, best of runs on a busy 2-core machine):
    ///   the same within noise at 8–16 kHz (0.4–0.75 ms); at 24 kHz direct 1.1–1.4 ms against
    ///   1.5–1.6 ms, at 48 kHz 1.2 ms against 1.8 ms (libopus does not synthesize the bands
    ///   above 8 kHz, and there is no soxr pass).
    /// - Words: at 24 and 48 kHz the hypotheses were identical for 10 and 9 of 12 files, and
    ///   the word error rate over 92 reference words the same within one word (40.2 % direct,
    ///   39.1 % / 40.2 % soxr). At 12 kHz direct did better (47.8 % against 54.3 %); at 8 kHz
    ///   both fail alike (89 %, 91 %), as 8 kHz PCM does (97 %): the model needs wideband.
    /// - Time: no resampler delay to hold back, so `flush()` has nothing to add.
    public enum OpusPath: String, Sendable, Hashable, CaseIterable {
        /// libopus decodes at the output rate (which must be 8/12/16/24/48 kHz).
        case direct
        /// libopus decodes at the declared rate; soxr resamples to the output rate.
        case resampled
    }

    /// What one message produced.
    public struct Report: Sendable, Equatable {
        /// Samples the message held, at the declared rate (how far the timeline advanced).
        public var inputSamples: Int
        /// Samples appended to the output, at the output rate.
        public var outputSamples: Int
        /// For an Opus packet that could not be decoded: a non-fatal `bad_audio` error saying
        /// so (the packet was concealed). `nil` otherwise.
        public var concealment: StenoError?
    }

    /// The declared input format.
    public let format: AudioFormat
    /// The output rate (Hz).
    public let outputRate: Int
    /// For Opus, how it reaches the output rate; `nil` for PCM.
    public let opusPath: OpusPath?
    /// Input and output sample counts and their times on the session timeline.
    public private(set) var clock: AudioClock

    private let pcm: PCMConverter?
    private let opus: OpusDecoder?
    private let resampler: Resampler?
    /// False only for PCM at the output rate, which `PCMConverter` already keeps in -1...1.
    private let needsClamp: Bool
    /// The output of the message being ingested, written in place (no per-message copy).
    private var output: UnsafeMutablePointer<Float>
    private var outputCapacity: Int
    /// Samples at the input rate, before resampling (PCM at another rate, resampled Opus).
    private var input: UnsafeMutablePointer<Float>
    private var inputCapacity: Int

    /// An ingest for a validated format, producing mono samples at `outputRate` (default
    /// 16 kHz). Throws `unsupported_audio` if `outputRate` is outside 8–48 kHz, or (for the
    /// direct Opus path) not an Opus rate.
    public init(format: AudioFormat, outputRate: Int = 16_000, opusPath: OpusPath = .direct) throws(StenoError) {
        self.format = format
        self.outputRate = outputRate
        clock = AudioClock(inputRate: format.sampleRate, outputRate: outputRate)
        switch format.encoding {
        case .pcmS16LE, .pcmF32LE:
            pcm = try PCMConverter(format: format)
            opus = nil
            resampler = try Resampler(inputRate: format.sampleRate, outputRate: outputRate)
            self.opusPath = nil
        case .opus:
            pcm = nil
            self.opusPath = opusPath
            switch opusPath {
            case .direct:
                opus = try OpusDecoder(outputRate: outputRate)
                resampler = nil
            case .resampled:
                opus = try OpusDecoder(outputRate: format.sampleRate)
                resampler = try Resampler(inputRate: format.sampleRate, outputRate: outputRate)
            }
        }
        needsClamp = !(pcm != nil && resampler?.isPassthrough == true)
        // Room for 120 ms (the longest Opus packet) either side; PCM grows it as needed.
        inputCapacity = max(5_760, format.sampleRate * 12 / 100)
        outputCapacity = max(5_760, outputRate * 12 / 100 + 64)
        input = .allocate(capacity: inputCapacity)
        output = .allocate(capacity: outputCapacity)
    }

    deinit {
        input.deallocate()
        output.deallocate()
    }

    /// Seconds of audio received (the end of the session timeline so far).
    public var inputSeconds: Double { clock.receivedSeconds }
    /// Samples produced at the output rate so far.
    public var outputSamples: Int { clock.outputSamples }
    /// Opus packets that could not be decoded and were concealed (0 for PCM).
    public var concealedPackets: Int { opus?.concealedPackets ?? 0 }
    /// Opus packets decoded (0 for PCM).
    public var decodedPackets: Int { opus?.decodedPackets ?? 0 }

    /// Takes one binary message and passes its samples (at the output rate) to `body`, without
    /// copying them: the buffer is the ingest's own and is valid only inside `body`.
    /// Throws `bad_audio` for a PCM message that is not frame-aligned (`body` is not called and
    /// the clock does not move). Opus never throws.
    public func ingest<R>(_ message: UnsafeRawBufferPointer,
                        _ body: (UnsafeBufferPointer<Float>, Report) -> R) throws(StenoError) -> R {
        let report: Report
        if let pcm {
            report = try ingestPCM(message, pcm)
        } else if let opus {
            report = ingestOpus(message, opus)
        } else {
            report = Report(inputSamples: 0, outputSamples: 0, concealment: nil)
        }
        if needsClamp { Self.clamp(output, report.outputSamples) }
        return body(UnsafeBufferPointer(start: output, count: report.outputSamples), report)
    }

    /// Keeps every output sample in -1...1. Resampling can overshoot near full scale (Gibbs
    /// ripple: random full-scale input reaches ±1.3) and libopus' float output may exceed ±1;
    /// a consumer converting to 16-bit integers (pocketsphinx) must never see such values.
    private static func clamp(_ samples: UnsafeMutablePointer<Float>, _ count: Int) {
        for i in 0..<count { samples[i] = PCMConverter.sanitize(samples[i]) }
    }

    /// Takes one binary message and appends its samples (at the output rate) to `output`.
    /// Throws `bad_audio` for a PCM message that is not frame-aligned (nothing is appended and
    /// the clock does not move). Opus never throws.
    @discardableResult
    public func ingest(_ message: UnsafeRawBufferPointer, appendingTo output: inout [Float]) throws(StenoError) -> Report {
        try ingest(message) { samples, report in
            output.append(contentsOf: samples)
            return report
        }
    }

    /// Takes one binary message held in a byte array; returns its samples and report.
    public func ingest(_ message: [UInt8]) throws(StenoError) -> (samples: [Float], report: Report) {
        var samples: [Float] = []
        // withUnsafeBytes rethrows untyped errors; carry the typed one out in a Result.
        let report = try message.withUnsafeBytes { raw in
            Result { () throws(StenoError) -> Report in try ingest(raw, appendingTo: &samples) }
        }.get()
        return (samples, report)
    }

    /// Ends the input (or a stretch of it, e.g. on `finalize`): appends what the resampler
    /// still holds, so the output covers everything received. Afterwards `outputSamples ==
    /// clock.expectedOutputSamples`. More audio may follow; it starts a new clock segment.
    @discardableResult
    public func flush(appendingTo output: inout [Float]) -> Int {
        var appended = 0
        if let resampler {
            while true {
                reserveOutput(resampler.pendingOutputCount + 2)
                let produced = resampler.drain(into: self.output, capacity: outputCapacity)
                if produced == 0 { break }
                Self.clamp(self.output, produced)
                output.append(contentsOf: UnsafeBufferPointer(start: self.output, count: produced))
                appended += produced
            }
            resampler.restart()
        }
        clock.recordOutput(appended)
        clock.endSegment()
        return appended
    }

    /// A hole of `seconds` in the input (audio the client no longer has): flushes what the
    /// resampler holds (appended to `output`), restarts the Opus decoder (what follows is not
    /// the continuation of what came before), and moves the clock past the hole.
    @discardableResult
    public func skip(seconds: Double, flushingInto output: inout [Float]) -> Int {
        let appended = flush(appendingTo: &output)
        opus?.reset()
        let samples = seconds.isFinite ? Int((max(0, seconds) * Double(clock.inputRate)).rounded()) : 0
        clock.skipInput(samples)
        return appended
    }

    /// `flush(appendingTo:)` into a new array.
    public func flush() -> [Float] {
        var output: [Float] = []
        flush(appendingTo: &output)
        return output
    }

    private func ingestPCM(_ message: UnsafeRawBufferPointer, _ pcm: PCMConverter) throws(StenoError) -> Report {
        let frames = try pcm.frameCount(byteCount: message.count)
        let produced: Int
        if let resampler, !resampler.isPassthrough {
            reserveInput(frames)
            _ = try pcm.convert(message, into: UnsafeMutableBufferPointer(start: input, count: frames))
            produced = resample(UnsafeBufferPointer(start: input, count: frames), resampler)
        } else {
            reserveOutput(frames)
            produced = try pcm.convert(message, into: UnsafeMutableBufferPointer(start: output, count: frames))
        }
        clock.recordInput(frames)
        clock.recordOutput(produced)
        return Report(inputSamples: frames, outputSamples: produced, concealment: nil)
    }

    private func ingestOpus(_ message: UnsafeRawBufferPointer, _ opus: OpusDecoder) -> Report {
        let outcome: OpusDecoder.Outcome
        let produced: Int
        if let resampler {
            outcome = opus.decode(message, into: input)  // room for 120 ms at the declared rate
            produced = resample(UnsafeBufferPointer(start: input, count: outcome.sampleCount), resampler)
        } else {
            outcome = opus.decode(message, into: output)  // room for 120 ms at the output rate
            produced = outcome.sampleCount
        }
        // Exact: Opus durations are multiples of 2.5 ms, whole samples at every Opus rate.
        let inputSamples = outcome.sampleCount * format.sampleRate / opus.outputRate
        clock.recordInput(inputSamples)
        clock.recordOutput(produced)
        let concealment = outcome.concealed
            ? StenoError(.badAudio, "undecodable Opus packet of \(message.count) bytes "
                + "(\(outcome.reason ?? "unknown")); replaced by \(inputSamples * 1000 / format.sampleRate) ms of concealment")
            : nil
        return Report(inputSamples: inputSamples, outputSamples: produced, concealment: concealment)
    }

    /// Resamples `samples` into `output` (from its start); returns the count written.
    private func resample(_ samples: UnsafeBufferPointer<Float>, _ resampler: Resampler) -> Int {
        var offset = 0, produced = 0
        while offset < samples.count {
            let rest = UnsafeBufferPointer(rebasing: samples[offset...])
            reserveOutput(produced + resampler.maxOutputCount(forInput: rest.count), keeping: produced)
            let step = resampler.process(rest, into: output + produced, capacity: outputCapacity - produced)
            offset += step.consumed
            produced += step.produced
            if step.consumed == 0 && step.produced == 0 { break }  // no progress: never spin
        }
        return produced
    }

    /// Makes room for `count` output samples, keeping the first `keeping` already written
    /// for the current message (the buffer holds one message's output at a time).
    private func reserveOutput(_ count: Int, keeping: Int = 0) {
        guard count > outputCapacity else { return }
        let capacity = max(count, outputCapacity * 2)
        let grown = UnsafeMutablePointer<Float>.allocate(capacity: capacity)
        grown.update(from: output, count: min(keeping, outputCapacity))
        output.deallocate()
        output = grown
        outputCapacity = capacity
    }

    private func reserveInput(_ count: Int) {
        guard count > inputCapacity else { return }
        input.deallocate()
        inputCapacity = max(count, inputCapacity * 2)
        input = .allocate(capacity: inputCapacity)
    }
}
