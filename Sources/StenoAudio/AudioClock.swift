import StenoCore

/// The session's audio clock: it turns sample counts on both sides of the resampler into
/// seconds on the session timeline (0 = first sample of the first audio message; time
/// advances by the samples received at the declared rate, never by the wall clock).
///
/// It is right by construction, with nothing to tune:
/// - Input: `n` samples at the declared rate are `n / inputRate` seconds. For Opus, a
///   packet's samples at the declared rate are its duration times that rate, always a whole
///   number because Opus durations are multiples of 2.5 ms.
/// - Output: soxr removes its own filter delay, so output sample `k` of a resampled stream
///   *is* input time `k / outputRate`; decoding Opus straight at the output rate is exact in
///   the same way. Chunking changes nothing (soxr's output is bit-identical however the input
///   is split). See `Resampler` for the measurements.
/// - A `flush()` in mid-session ends one resampler stream and starts another, whose first
///   output sample lines up with the first input sample after the flush. The clock keeps one
///   *segment* per stream (its first input and output sample), so sample `k` maps to
///   `segment.inputStart / inputRate + (k - segment.outputStart) / outputRate`.
///   Without flushes there is one segment and the mapping is plain `k / outputRate`.
///
/// A value type: copy it freely across threads (e.g. hand a snapshot to the recognizer).
public struct AudioClock: Sendable, Hashable {
    /// Where one resampler stream starts, in samples on each side.
    public struct Segment: Sendable, Hashable {
        public var inputStart: Int
        public var outputStart: Int
    }

    /// The declared input rate (Hz).
    public let inputRate: Int
    /// The rate the recognizer gets (Hz), normally 16000.
    public let outputRate: Int
    /// Samples received so far, at the declared rate.
    public private(set) var inputSamples = 0
    /// Samples produced so far, at the output rate.
    public private(set) var outputSamples = 0
    /// One entry per resampler stream, in order; the first starts at 0/0.
    public private(set) var segments: [Segment] = [Segment(inputStart: 0, outputStart: 0)]

    public init(inputRate: Int, outputRate: Int) {
        self.inputRate = max(1, inputRate)
        self.outputRate = max(1, outputRate)
    }

    /// Samples per 10 ms recognizer frame at the output rate (160 at 16 kHz).
    public var frameSamples: Int { outputRate / 100 }

    /// Seconds of audio received: the end of the timeline so far.
    public var receivedSeconds: Double { seconds(atInputSample: inputSamples) }

    /// Seconds of audio the produced output covers (≤ `receivedSeconds`; the difference is
    /// what the resampler still holds until more input or a flush).
    public var producedSeconds: Double { seconds(atOutputSample: outputSamples) }

    /// Output samples the input so far yields once flushed (soxr's `round(n × out / in)`
    /// per segment). Equal to `outputSamples` right after a flush.
    public var expectedOutputSamples: Int {
        let last = segments[segments.count - 1]
        return last.outputStart + Resampler.expectedOutputCount(
            forInput: inputSamples - last.inputStart, inputRate: inputRate, outputRate: outputRate)
    }

    /// The time of input sample `n` (at the declared rate).
    public func seconds(atInputSample n: Int) -> Double {
        Double(n) / Double(inputRate)
    }

    /// The time of output sample `k` (at the output rate, counted from the session start).
    public func seconds(atOutputSample k: Int) -> Double {
        let segment = self.segment(containingOutput: k)
        return Double(segment.inputStart) / Double(inputRate)
            + Double(k - segment.outputStart) / Double(outputRate)
    }

    /// The start time of recognizer frame `f` (frames of `frameSamples` output samples,
    /// counted from the session start). The end of frame `f` is the start of frame `f + 1`.
    public func seconds(atFrame f: Int) -> Double {
        let (sample, overflow) = f.multipliedReportingOverflow(by: frameSamples)
        return overflow ? Double(f) * Double(frameSamples) / Double(outputRate) : seconds(atOutputSample: sample)
    }

    /// The output sample nearest to time `t` (the inverse of `seconds(atOutputSample:)`).
    /// Any `t` is accepted (it may come from a client's `finalize` message): NaN gives the
    /// segment's start, and absurd times are clamped to ±2^50 samples instead of trapping.
    public func outputSample(atSeconds t: Double) -> Int {
        let segment = self.segment(containingTime: t)
        let offset = (t - Double(segment.inputStart) / Double(inputRate)) * Double(outputRate)
        guard !offset.isNaN else { return segment.outputStart }
        let limit = Double(1 << 50)
        return segment.outputStart + Int(min(max(offset, -limit), limit).rounded())
    }

    // MARK: - Recording (done by `AudioIngest`, or by anyone driving their own pipeline)

    /// Records `n` samples received at the declared rate.
    public mutating func recordInput(_ n: Int) { inputSamples += max(0, n) }

    /// Records `n` samples produced at the output rate.
    public mutating func recordOutput(_ n: Int) { outputSamples += max(0, n) }

    /// Records a flush: the next output sample starts a new resampler stream at the current
    /// input position. A flush with no input since the previous one changes nothing.
    public mutating func endSegment() {
        let last = segments[segments.count - 1]
        guard inputSamples != last.inputStart || outputSamples != last.outputStart else { return }
        segments.append(Segment(inputStart: inputSamples, outputStart: outputSamples))
    }

    /// Records a hole in the input: `n` samples at the declared rate that never arrived. The
    /// next output sample is the first after the hole. Call it right after `endSegment()`
    /// (a flush), so that nothing of the input before the hole is still to come out.
    public mutating func skipInput(_ n: Int) {
        guard n > 0 else { return }
        inputSamples += n
        let last = segments.count - 1
        if segments[last].outputStart == outputSamples {
            segments[last].inputStart = inputSamples
        } else {
            segments.append(Segment(inputStart: inputSamples, outputStart: outputSamples))
        }
    }

    private func segment(containingOutput k: Int) -> Segment {
        // Last segment whose output starts at or before k (binary search; segments are few).
        var low = 0, high = segments.count - 1
        while low < high {
            let mid = (low + high + 1) / 2
            if segments[mid].outputStart <= k { low = mid } else { high = mid - 1 }
        }
        return segments[low]
    }

    private func segment(containingTime t: Double) -> Segment {
        var low = 0, high = segments.count - 1
        while low < high {
            let mid = (low + high + 1) / 2
            if seconds(atInputSample: segments[mid].inputStart) <= t { low = mid } else { high = mid - 1 }
        }
        return segments[low]
    }
}
