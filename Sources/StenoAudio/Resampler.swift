import CSoxr
import StenoCore

/// A streaming mono `Float` resampler over libsoxr at its "HQ" quality (20-bit, linear
/// phase, full alias rejection).
///
/// How soxr's stream lines up (measured on soxr 0.1.3 with impulses and random signals,
/// every input length 0...3000 and 200,000-sample streams, at 8/11.025/12/16/22.05/24/32/
/// 44.1/48 kHz and the odd rates 9,999 and 47,999 Hz into 16 kHz):
///
/// - soxr removes its own filter delay: output sample `k` is the signal at input time
///   `k / outputRate`, exactly as if the first output sample lined up with the first input
///   sample. An impulse at input time 0.5 s comes out centred on output sample 8000 at 16 kHz
///   (within 0.0002 samples; 0.17 samples at 11.025 kHz). The delay (≈16 ms at HQ) shows only
///   as *latency*: the last samples of the output arrive when more input, or `flush()`, comes.
/// - After `flush()`, the total output for `n` input samples is `round(n × out / in)` with
///   halves rounded up, i.e. `(2·n·out + in) / (2·in)` in integers
///   (`expectedOutputCount(forInput:)`); never a sample more or less.
/// - Chunking does not matter: feeding the same input in pieces of 1, 7, 960, 4096 samples or
///   mixed sizes gives bit-identical output to one call.
///
/// So time needs no delay compensation: the clock just counts output samples.
///
/// Resampling is linear: near full scale the output can overshoot ±1 (random full-scale
/// noise reaches about ±1.3). `AudioIngest` clamps its output; other users must too.
///
/// When the input and output rates are equal the resampler is a copy: no soxr handle exists
/// and `flush()` returns nothing.
///
/// Not `Sendable`: one session owns its resampler and calls it from one thread at a time.
public final class Resampler {
    public let inputRate: Int
    public let outputRate: Int
    /// Input samples accepted since creation or the last `flush()`.
    public private(set) var inputCount = 0
    /// Output samples produced since creation or the last `flush()`.
    public private(set) var outputCount = 0

    private let soxr: soxr_t?
    private var scratch: UnsafeMutablePointer<Float>
    private var scratchCapacity: Int

    /// Input rates a resampler accepts.
    public static let inputRates: ClosedRange<Int> = 8_000...48_000
    /// Output rates a resampler accepts.
    public static let outputRates: ClosedRange<Int> = 8_000...48_000

    /// A resampler from `inputRate` to `outputRate` (both in Hz, 8000...48000).
    /// Throws `unsupported_audio` for rates outside that range, `internal` if soxr fails.
    public init(inputRate: Int, outputRate: Int = 16_000) throws(StenoError) {
        guard Self.inputRates.contains(inputRate) else {
            throw StenoError(.unsupportedAudio, "resampler input rate must be 8000-48000 Hz, not \(inputRate)")
        }
        guard Self.outputRates.contains(outputRate) else {
            throw StenoError(.unsupportedAudio, "resampler output rate must be 8000-48000 Hz, not \(outputRate)")
        }
        self.inputRate = inputRate
        self.outputRate = outputRate
        if inputRate == outputRate {
            soxr = nil
        } else {
            var error: soxr_error_t?
            var quality = soxr_quality_spec(UInt(SOXR_HQ), 0)
            var io = soxr_io_spec(SOXR_FLOAT32_I, SOXR_FLOAT32_I)
            var runtime = soxr_runtime_spec(1)
            let handle = soxr_create(Double(inputRate), Double(outputRate), 1, &error, &io, &quality, &runtime)
            guard let handle, error == nil else {
                if let handle { soxr_delete(handle) }
                let reason = error.map { String(cString: $0) } ?? "unknown error"
                throw StenoError(.internal, "soxr_create(\(inputRate) → \(outputRate)) failed: \(reason)")
            }
            soxr = handle
        }
        scratchCapacity = 4096
        scratch = .allocate(capacity: scratchCapacity)
    }

    deinit {
        if let soxr { soxr_delete(soxr) }
        scratch.deallocate()
    }

    /// Whether this resampler only copies (equal rates).
    public var isPassthrough: Bool { soxr == nil }

    /// The number of output samples `n` input samples produce in total once flushed
    /// (soxr's rule, checked in tests): `round(n × out / in)`, halves up.
    public static func expectedOutputCount(forInput n: Int, inputRate: Int, outputRate: Int) -> Int {
        guard n > 0, inputRate > 0 else { return 0 }
        // 2·n·out + in cannot overflow for any realistic stream (n < 2^40 samples).
        return (2 &* n &* outputRate &+ inputRate) / (2 &* inputRate)
    }

    /// `expectedOutputCount(forInput:)` for this resampler's rates.
    public func expectedOutputCount(forInput n: Int) -> Int {
        Self.expectedOutputCount(forInput: n, inputRate: inputRate, outputRate: outputRate)
    }

    /// The most output one `process` call with `n` more input samples can produce: soxr
    /// never runs ahead of `expectedOutputCount` for the input it has had (checked in tests),
    /// plus a little slack.
    public func maxOutputCount(forInput n: Int) -> Int {
        expectedOutputCount(forInput: inputCount + n) - outputCount + 2
    }

    /// Output samples still held back (the filter delay); `flush()` produces exactly these.
    public var pendingOutputCount: Int { expectedOutputCount(forInput: inputCount) - outputCount }

    /// Resamples `input` and appends whatever output is ready to `output`; returns how many
    /// samples were appended. Output lags input by the filter delay until `flush()`.
    @discardableResult
    public func process(_ input: UnsafeBufferPointer<Float>, appendingTo output: inout [Float]) -> Int {
        var appended = 0
        var offset = 0
        while offset < input.count {
            let rest = UnsafeBufferPointer(rebasing: input[offset...])
            ensureScratch(maxOutputCount(forInput: rest.count))
            let (consumed, produced) = process(rest, into: scratch, capacity: scratchCapacity)
            output.append(contentsOf: UnsafeBufferPointer(start: scratch, count: produced))
            appended += produced
            offset += consumed
            if consumed == 0 && produced == 0 { break }  // no progress: never spin
        }
        return appended
    }

    /// Resamples as much of `input` as soxr takes into `destination` (room for `capacity`
    /// samples). Give it `maxOutputCount(forInput:)` of room and it takes all of the input;
    /// with less, call again with the rest. Used by `AudioIngest` to write its output in place.
    func process(_ input: UnsafeBufferPointer<Float>, into destination: UnsafeMutablePointer<Float>,
                 capacity: Int) -> (consumed: Int, produced: Int) {
        guard let base = input.baseAddress, !input.isEmpty else { return (0, 0) }
        guard let soxr else {
            let count = min(input.count, capacity)
            destination.update(from: base, count: count)
            inputCount += count
            outputCount += count
            return (count, count)
        }
        var consumed = 0
        var produced = 0
        let error = soxr_process(soxr, base, input.count, &consumed, destination, capacity, &produced)
        // soxr only fails on misuse (a failed create), never because of sample values.
        if error != nil { return (0, 0) }
        inputCount += consumed
        outputCount += produced
        return (consumed, produced)
    }

    /// Resamples an array; returns the output that is ready.
    public func process(_ input: [Float]) -> [Float] {
        var output: [Float] = []
        output.reserveCapacity(expectedOutputCount(forInput: input.count) + 64)
        input.withUnsafeBufferPointer { _ = process($0, appendingTo: &output) }
        return output
    }

    /// Ends the input: appends the remaining tail, so that the output since the last flush
    /// totals exactly `expectedOutputCount(forInput: inputCount)`. Afterwards the resampler
    /// starts a fresh stream (soxr is cleared; counts restart at 0); the next stream's first
    /// output sample lines up with its first input sample.
    @discardableResult
    public func flush(appendingTo output: inout [Float]) -> Int {
        var appended = 0
        if soxr != nil {
            while true {
                ensureScratch(pendingOutputCount + 2)
                let produced = drain(into: scratch, capacity: scratchCapacity)
                if produced == 0 { break }
                output.append(contentsOf: UnsafeBufferPointer(start: scratch, count: produced))
                appended += produced
            }
        }
        restart()
        return appended
    }

    /// One step of a flush: writes up to `capacity` tail samples to `destination` and returns
    /// how many; 0 when the tail is done. Call `restart()` afterwards.
    func drain(into destination: UnsafeMutablePointer<Float>, capacity: Int) -> Int {
        guard let soxr else { return 0 }
        var produced = 0
        if soxr_process(soxr, nil, 0, nil, destination, capacity, &produced) != nil { return 0 }
        outputCount += produced
        return produced
    }

    /// Clears soxr for a fresh stream and restarts the counts.
    func restart() {
        if let soxr { _ = soxr_clear(soxr) }
        inputCount = 0
        outputCount = 0
    }

    /// Ends the input and returns the tail.
    public func flush() -> [Float] {
        var output: [Float] = []
        flush(appendingTo: &output)
        return output
    }

    private func ensureScratch(_ needed: Int) {
        guard needed > scratchCapacity else { return }
        scratch.deallocate()
        scratchCapacity = max(needed, scratchCapacity * 2)
        scratch = .allocate(capacity: scratchCapacity)
    }
}
