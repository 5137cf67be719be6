import StenoAudio

/// Which of a sender's frames go out and which are left out as silence, by `SilenceSuppressor`'s
/// rules (StenoAudio: what it says is audio is sent, what it leaves out is declared).
///
/// The sender's frames keep their grid (20 ms each, on the sender's timeline), so the
/// suppressor's verdicts, per 10 ms, are put on frames: a frame that holds any audio is sent
/// whole, a frame that is all silence is left out, and a run of frames left out is declared as
/// one silence of exactly their length. Frames wait here until the suppressor has judged all of
/// their samples (during a pause, until it declares the silence it left out: soon after the
/// pause begins, then every few seconds; when speech resumes, at once).
///
/// Pure: samples in, verdicts out, in order; no clock.
struct SilenceGate<Payload> {
    enum Release {
        /// Send this frame, which starts at `start` (samples at the gate's rate).
        case send(Payload, start: Int, length: Int)
        /// Declare `length` samples from `start` as silence.
        case silence(start: Int, length: Int)
    }

    let sampleRate: Int
    private var suppressor: SilenceSuppressor
    private var waiting: [(payload: Payload, start: Int, length: Int, audio: Bool)] = []
    private var head = 0
    /// Samples given so far, and how many of them the suppressor has judged.
    private var fed = 0
    private var judged = 0
    /// Frames left out and not yet declared.
    private var silenceStart = 0
    private var silenceLength = 0

    init(sampleRate: Int) {
        self.sampleRate = sampleRate
        suppressor = SilenceSuppressor(sampleRate: sampleRate)
    }

    /// One frame: its mono samples (what the suppressor judges) and what to send for it.
    mutating func push(_ mono: [Float], payload: Payload) -> [Release] {
        waiting.append((payload, fed, mono.count, false))
        fed += mono.count
        apply(suppressor.push(mono))
        return release(all: false)
    }

    /// End of the input: every frame held is judged and released.
    mutating func finish() -> [Release] {
        apply(suppressor.finish())
        return release(all: true)
    }

    private mutating func apply(_ outputs: [SilenceSuppressor.Output]) {
        for output in outputs {
            switch output {
            case .audio(let samples):
                // Every frame that overlaps this audio is sent.
                let from = judged, to = judged + samples.count
                var i = head
                while i < waiting.count, waiting[i].start < to {
                    if waiting[i].start + waiting[i].length > from { waiting[i].audio = true }
                    i += 1
                }
                judged = to
            case .silence(let seconds):
                judged += Int((seconds * Double(sampleRate)).rounded())
            }
        }
    }

    private mutating func release(all: Bool) -> [Release] {
        var out: [Release] = []
        while head < waiting.count, all || waiting[head].start + waiting[head].length <= judged {
            let frame = waiting[head]
            head += 1
            if frame.audio || frame.length == 0 {
                declare(into: &out)
                out.append(.send(frame.payload, start: frame.start, length: frame.length))
            } else {
                if silenceLength == 0 { silenceStart = frame.start }
                silenceLength += frame.length
            }
        }
        // What was left out is declared as soon as it is known to be silence.
        declare(into: &out)
        if head > 64, head * 2 > waiting.count {
            waiting.removeFirst(head)
            head = 0
        }
        return out
    }

    private mutating func declare(into out: inout [Release]) {
        guard silenceLength > 0 else { return }
        out.append(.silence(start: silenceStart, length: silenceLength))
        silenceLength = 0
    }
}
