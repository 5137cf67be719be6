import Dispatch
import StenoCore
import StenoSpeech
import StenoSystem

#if canImport(Glibc)
import Glibc
#endif

/// One session run in the calling thread: StenoCore's `SessionMachine` (the protocol) driving a
/// `TranscriptionPipeline` (decode → resample → recognize), with no sockets. `steno transcribe`,
/// the benchmarks and the pipeline tests use it; the server drives the same two pieces across
/// its network thread and worker lanes.
///
/// Inputs are the wire protocol's: a `start` text, binary audio frames, `finalize`, `end`,
/// `cancel`. Out come the wire events, exactly as a client would receive them.
///
/// Not `Sendable`: use it from one thread.
public final class LocalSession {
    /// Every event sent so far, in order, numbered as a client receives them (a local
    /// session is its own connection: this is where its `seq` comes from).
    public private(set) var events: [EncodedEvent] = []
    /// Called with each event as it is sent.
    public var onEvent: ((EncodedEvent) -> Void)?
    /// The close code, once the session has closed.
    public private(set) var closeCode: UInt16?

    private var machine: SessionMachine
    private let engine: any SpeechEngine
    private var pipeline: TranscriptionPipeline?
    /// Signalled when the recognizer, waiting for a shared decoder, can go on.
    private let woken = DispatchSemaphore(value: 0)

    /// A session on `engine`. Limits that depend on wall time (idle, session length) are off
    /// unless given: a file is not a live stream.
    public init(engine: any SpeechEngine, limits: SessionLimits? = nil, id: String = "local") {
        self.engine = engine
        let info = engine.info
        var configuration = SessionConfiguration(
            engine: info.announced,
            limits: limits ?? SessionLimits(maxSessionSeconds: 0, idleTimeoutSeconds: 0, startTimeoutSeconds: 0))
        configuration.models = engine.servedModels
        self.machine = SessionMachine(id: id, configuration: configuration, now: Self.now())
    }

    /// The finals so far.
    public var finals: [RecognitionResult] { machine.finals }
    /// Where the session is.
    public var phase: SessionPhase { machine.phase }
    /// Seconds of audio received.
    public var receivedSeconds: Double { machine.receivedSeconds }

    /// A text frame from the client (`start`, `finalize`, `end`, `cancel`).
    public func send(text: String) {
        handle(.text(text, now: Self.now(), wallClock: Self.wallClock()))
    }

    /// A binary frame from the client (audio).
    public func send(audio: [UInt8]) {
        handle(.audio(audio, now: Self.now()))
    }

    /// Sends `start` for this format, with the request's options; `text` as the wire's
    /// "format", `phrases` (one per item), `boost` and `alternatives` as its "phrases", "boost"
    /// and "alternatives".
    public func start(format: AudioFormat, volatile: Bool = true, words: Bool = true, language: String? = nil,
                      text: TextFormat = .readable, phrases: [String] = [], boost: Double? = nil, alternatives: Int = 0,
                      model: String? = nil) {
        send(text: ClientMessage.startText(format, language: language, model: model, volatile: volatile, words: words,
                                           format: text, phrases: phrases, boost: boost, alternatives: alternatives))
    }

    /// Sends `end` (finals, then `ended`, then the close).
    public func end() { send(text: #"{"type":"end"}"#) }

    // MARK: -

    private func handle(_ input: SessionInput) {
        for action in machine.handle(input) {
            perform(action)
        }
    }

    private func perform(_ action: SessionAction) {
        switch action {
        case .send(let event):
            let numbered = event.numbered(UInt64(events.count + 1))
            events.append(numbered)
            onEvent?(numbered)
        case .startPipeline(let request):
            do throws(StenoError) {
                let woken = self.woken
                let options = RecognizerOptions(vocabulary: request.vocabulary, alternatives: request.alternatives,
                                                model: request.model)
                let recognizer = try engine.makeRecognizer(options: options) { woken.signal() }
                pipeline = try TranscriptionPipeline(format: request.audio, recognizer: recognizer)
                for notice in recognizer.notices { handle(.pipelineWarning(notice)) }
            } catch {
                handle(.pipelineFailed(error.message))
            }
        case .submitAudio(let chunk):
            run { pipeline throws(StenoError) in
                let output = try pipeline.append(chunk.bytes)
                try results(output.events, pipeline)
                if let warning = output.warning, !chunk.headerIsMalformed { handle(.pipelineWarning(warning)) }
            }
        case .submitFinalize(let through):
            run { pipeline throws(StenoError) in
                try results(try pipeline.finalize(through: through), pipeline)
                handle(.finalizeCompleted)
            }
        case .submitEnd:
            run { pipeline throws(StenoError) in
                try results(try pipeline.finish(), pipeline)
                handle(.endCompleted)
            }
        case .submitGap(_, let duration):
            run { pipeline throws(StenoError) in
                try results(try pipeline.gap(seconds: duration), pipeline)
            }
        case .resume:
            handle(.resumeRejected("a local session has nothing to resume"))
        case .cancelPipeline:
            pipeline?.cancel()
            pipeline = nil
        case .pauseReading, .resumeReading:
            break  // the caller feeds audio in its own thread, at its own pace
        case .close(let code, _):
            closeCode = code
        }
    }

    /// The events of a pipeline step; if the recognizer then waits for a shared decoder (the
    /// engine serves other sessions too), waits for it here — a local session has nothing else
    /// to do — and takes what it makes when it goes on.
    private func results(_ events: [TranscriberEvent], _ pipeline: TranscriptionPipeline) throws(StenoError) {
        handle(.results(events, analyzedThrough: pipeline.analyzedSeconds, now: Self.now()))
        while pipeline.isWaiting {
            woken.wait()
            let more = try pipeline.proceed()
            handle(.results(more, analyzedThrough: pipeline.analyzedSeconds, now: Self.now()))
        }
    }

    private func run(_ body: (TranscriptionPipeline) throws(StenoError) -> Void) {
        guard let pipeline else { return }
        do throws(StenoError) {
            try body(pipeline)
        } catch {
            pipeline.cancel()
            self.pipeline = nil
            handle(.pipelineFailed(error.message))
        }
    }

    private static func now() -> Double { SystemClock.now() }
    private static func wallClock() -> UTCTime { SystemClock.wall() }
}
