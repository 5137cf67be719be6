import StenoCore
import StenoSession
import StenoSpeech
import StenoSystem

// The session driver in memory: a host that keeps what it is asked to do, a clock moved by
// hand, jobs run when the test says (`InlineExecutor.runUntilIdle`), and a recognizer that
// keeps a log of what it was fed instead of recognizing.

/// A host that records: events (numbered as delivered), reading paused and resumed, the close,
/// the due times it was given, and its notes.
final class RecordingHost: SessionDriver, @unchecked Sendable {
    // Safety: `Record` is the core's, under its lock; `notes` has a lock of its own.
    struct Record {
        var events: [String] = []
        var reading: [Bool] = []
        var close: UInt16?
        var dues: [Double] = []
    }

    let core: SessionCore<Record>
    let clock: ManualTime
    let executor: InlineExecutor
    private let noted = Locked<[SessionNote]>([])

    init(engine: TapeEngine, limits: SessionLimits, options: DriverOptions = DriverOptions(), clock: ManualTime = ManualTime()) {
        self.clock = clock
        executor = InlineExecutor()
        let configuration = SessionConfiguration(engine: engine.info.announced, limits: limits)
        let machine = SessionMachine(id: "memory", configuration: configuration, now: clock.now())
        core = SessionCore(machine: machine, local: Record(), engine: engine, executor: executor, clock: clock, options: options)
    }

    func deliver(_ event: EncodedEvent, _ s: inout SessionState<Record>) -> [SessionAction] {
        s.local.events.append(event.numbered(UInt64(s.local.events.count + 1)).text)
        return []
    }

    func starting(_ request: StartRequest, _ s: inout SessionState<Record>) -> [SessionAction] { [] }
    func setReading(_ reading: Bool, _ s: inout SessionState<Record>) { s.local.reading.append(reading) }
    func close(code: UInt16, reason: String, _ s: inout SessionState<Record>) { s.local.close = code }
    func protocolClosed(_ s: inout SessionState<Record>) {}
    func schedule(at due: Double, _ s: inout SessionState<Record>) { s.local.dues.append(due) }
    func note(_ note: SessionNote) { noted.withLock { $0.append(note) } }

    var record: Record { core.read { $0.local } }
    var notes: [SessionNote] { noted.withLock { $0 } }

    /// The events' types, in order.
    var kinds: [String] {
        record.events.compactMap { text in
            guard case .object(let o)? = try? JSONParser(maxDepth: 16, maxBytes: 1 << 20).parse(text), case .string(let t)? = o["type"] else { return nil }
            return t
        }
    }

    /// When the session last said it next needs a tick.
    var due: Double? { record.dues.last }

    /// A started session on a fresh tape engine.
    static func started(_ limits: SessionLimits, options: DriverOptions = DriverOptions(),
                        volatile: Bool = true) throws -> (TapeEngine, RecordingHost) {
        let engine = TapeEngine()
        let host = RecordingHost(engine: engine, limits: limits, options: options)
        try host.start(volatile: volatile)
        return (engine, host)
    }

    /// A tick at the clock's time, and the jobs it queued run.
    func tickAndRun() {
        tick()
        executor.runUntilIdle()
    }

    /// Starts a 16 kHz PCM session and runs its first jobs.
    func start(volatile: Bool = true) throws {
        let format = try AudioFormat(encoding: .pcmS16LE, sampleRate: 16000, channels: 1)
        receivedText(ClientMessage.startText(format, volatile: volatile))
        executor.runUntilIdle()
    }

    /// `seconds` of audio in one message: a loud square wave (speech to the tape) or silence.
    func send(seconds: Double, loud: Bool) {
        let n = Int((seconds * 16000).rounded())
        var bytes = [UInt8](repeating: 0, count: 2 * n)
        if loud {
            for i in stride(from: 0, to: n, by: 2) { bytes[2 * i + 1] = 0x40 }
        }
        receivedAudio(bytes)
    }
}

/// What the tape recognizers were fed, call by call (samples per `accept`), and what else they
/// were asked.
final class Tape: Sendable {
    enum Call: Equatable { case accept(Int), endUtterance, finish, skip(Int) }
    private let calls = Locked<[Call]>([])

    func append(_ call: Call) { calls.withLock { $0.append(call) } }
    var all: [Call] { calls.withLock { $0 } }
    /// Samples fed so far.
    var samples: Int { all.reduce(0) { if case .accept(let n) = $1 { $0 + n } else { $0 } } }
}

/// An engine whose recognizers recognize nothing but loudness: speech starts at the first loud
/// sample, and an utterance ended while speech went on is one word, "loud", through the audio fed.
final class TapeEngine: SpeechEngine {
    let info = SpeechEngineInfo(name: "tape", version: "1", model: "tape", language: "en-US", sampleRate: 16000)
    let tape = Tape()
    /// The options each recognizer was made with.
    let asked = Locked<[RecognizerOptions]>([])

    func makeRecognizer(options: RecognizerOptions, wake: @escaping @Sendable () -> Void) throws(StenoError) -> any SpeechRecognizer {
        asked.withLock { $0.append(options) }
        return TapeRecognizer(info: info, tape: tape)
    }
}

final class TapeRecognizer: SpeechRecognizer {
    let info: SpeechEngineInfo
    let tape: Tape
    var sampleRate: Int { 16000 }
    private var fed = 0
    private var speechFrom: Int?

    init(info: SpeechEngineInfo, tape: Tape) {
        self.info = info
        self.tape = tape
    }

    var receivedSeconds: Double { Double(fed) / 16000 }
    var analyzedSeconds: Double { receivedSeconds }
    var isWaiting: Bool { false }
    /// It says where its 2048-sample blocks end, as pocketsphinx's recognizer does.
    var samplesToNextBlock: Int? { 2048 - fed % 2048 }

    func accept(_ samples: UnsafeBufferPointer<Float>) throws(StenoError) -> [TranscriberEvent] {
        tape.append(.accept(samples.count))
        var events: [TranscriberEvent] = []
        if speechFrom == nil, let first = samples.firstIndex(where: { abs($0) > 0.1 }) {
            speechFrom = fed + first
            events.append(.speechStarted(at: Double(fed + first) / 16000))
        }
        fed += samples.count
        return events
    }

    func endUtterance() throws(StenoError) -> [TranscriberEvent] {
        tape.append(.endUtterance)
        guard let from = speechFrom else { return [] }
        speechFrom = nil
        let range = TimeRange(start: Double(from) / 16000, end: receivedSeconds)
        return [.final(RecognitionResult(range: range, text: "loud", words: [Word("loud", range: range, confidence: 1)])),
                .speechEnded(at: receivedSeconds)]
    }

    func finish() throws(StenoError) -> [TranscriberEvent] {
        tape.append(.finish)
        return try endUtterance()
    }

    func skipSilence(_ samples: Int) throws(StenoError) -> [TranscriberEvent] {
        tape.append(.skip(samples))
        let events = try endUtterance()
        fed += samples
        return events
    }

    func cancel() {}
    func proceed() throws(StenoError) -> [TranscriberEvent] { [] }
}
