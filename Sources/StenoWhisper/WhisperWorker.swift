import Foundation
import StenoCore
import StenoSystem

/// What the worker made of one request (its result frame's JSON).
public struct WhisperResult: Sendable, Hashable {
    /// The text, written as Whisper writes (capitals, punctuation); empty when dropped.
    public var text: String
    /// Words with times in seconds from the request's first sample, and probabilities.
    public var words: [Word]
    /// Why the text was dropped (no_speech, repetitive, low_confidence, empty), or nil.
    public var dropped: String?
    public var noSpeechProbability: Double
    /// Encoder frames the request was heard in (3000: Whisper's full 30 s).
    public var window: Int
    /// The worker's CPU seconds for it (its share of its batch).
    public var seconds: Double
    /// Readings of the audio when asked for (the beam's hypotheses): the text first with score 0,
    /// then the others, best first, scored relative to it (≤ 0).
    public var alternatives: [Alternative]
    /// Whisper's code of the language it was heard as ("en", "de"), and how likely when detected.
    public var language: String?
    public var languageProbability: Double?
    /// How likely each of the request's `candidates` is (tags as asked; nil for one the model
    /// lacks), when it asked for candidates.
    public var languageScores: [String: Double?] = [:]
    /// A translation's original, when asked for (`"original"`): its text, words (times as the
    /// result's) and Whisper's code of its language.
    public var original: Original?

    init(json: JSONValue) throws(StenoError) {
        guard case .object(let o) = json, case .string(let text)? = o["text"] else {
            throw StenoError(.internal, "the Whisper worker sent a result without text")
        }
        self.text = text
        self.words = Self.words(o["words"])
        if case .object(let heard)? = o["original"], case .string(let text)? = heard["text"] {
            var code: String?
            if case .string(let c)? = heard["language"] { code = c }
            original = Original(text: text, words: Self.words(heard["words"]), language: code)
        }
        if case .string(let why)? = o["dropped"] { dropped = why } else { dropped = nil }
        if case .number(let p)? = o["noSpeech"] { noSpeechProbability = p } else { noSpeechProbability = 0 }
        if case .number(let w)? = o["window"] { window = Int(w) } else { window = 0 }
        if case .number(let c)? = o["seconds"], c.isFinite { seconds = max(0, c) } else { seconds = 0 }
        var alternatives: [Alternative] = []
        if case .array(let list)? = o["alternatives"] {
            for item in list {
                guard case .array(let a) = item, a.count == 2, case .string(let t) = a[0], case .number(let s) = a[1],
                      s.isFinite else { continue }
                alternatives.append(Alternative(text: t, score: min(0, s)))
            }
        }
        self.alternatives = alternatives
        if case .string(let code)? = o["language"] { language = code } else { language = nil }
        if case .number(let p)? = o["languageProbability"], p.isFinite { languageProbability = p } else { languageProbability = nil }
        if case .object(let scores)? = o["languageScores"] {
            for tag in scores.keys {
                if case .number(let p)? = scores[tag], p.isFinite { languageScores[tag] = min(max(p, 0), 1) } else { languageScores[tag] = .some(nil) }
            }
        }
    }

    /// The worker's `[[text, start, end, probability], ...]`; an item of another shape is left out.
    private static func words(_ value: JSONValue?) -> [Word] {
        guard case .array(let list)? = value else { return [] }
        var words: [Word] = []
        for item in list {
            guard case .array(let w) = item, w.count == 4, case .string(let t) = w[0],
                  case .number(let s) = w[1], case .number(let e) = w[2], case .number(let p) = w[3] else { continue }
            words.append(Word(t, range: TimeRange(start: s, end: max(s, e)), confidence: p))
        }
        return words
    }
}

/// Steno's Whisper worker process, supervised: started, watched, restarted when it dies, and
/// every request it had not answered sent again to the new one, so no utterance is lost to a
/// crash. Requests wait in a bounded queue (`maximumPending`); `submit` refuses past it, which
/// is the engine's backpressure, except for requests that may wait (`waitIfFull`: finals), which
/// wait their turn. Thread-safe; its own threads write and read the pipes and watch the worker.
///
/// A request the worker was hearing when it died or hung (`hangSeconds` without a word from
/// it) is heard again alone, once: if that worker dies too, the request fails, and only its
/// own session with it. A worker that dies while loading its model is started again after a
/// growing pause (up to `loadBackoffLimit`), not at once for ever.
public final class WhisperWorker: Sendable {
    public typealias Completion = @Sendable (Result<WhisperResult, StenoError>) -> Void

    public struct Options: Sendable {
        /// The Python of the virtual environment with the worker's packages.
        public var python: String
        /// scripts/whisper_worker.py.
        public var script: String
        /// The worker's own options (`--model DIR`, `--device cuda`, `--batch N` …).
        public var arguments: [String]
        /// Requests sent and not answered, at most (those that may wait for room aside).
        public var maximumPending: Int
        /// Where the worker's standard error (and output) goes: a file, "-" for this process's own (nil: nowhere).
        public var log: String?
        /// Where the supervisor says that the worker died and was restarted.
        public var events: Log
        /// Seconds the worker may hear a batch without a word before it is taken for hung and
        /// ended (a batch of finals in 30 s windows takes a few seconds on a loaded machine).
        public var hangSeconds: Double
        /// The longest pause before starting again a worker that keeps dying while it loads.
        public var loadBackoffLimit: Double
        /// Started by the first request rather than at once (a model beside the default, which
        /// an English-only server never asks for: its memory is not taken until it is). Until it
        /// has loaded, requests wait in its queue; if it cannot load, they fail, and the next
        /// request tries again.
        public var onDemand: Bool

        public init(python: String, script: String, arguments: [String] = [], maximumPending: Int = 256, log: String? = nil,
                    events: Log = Log(), hangSeconds: Double = 30, loadBackoffLimit: Double = 30, onDemand: Bool = false) {
            self.onDemand = onDemand
            self.events = events
            self.python = python
            self.script = script
            self.arguments = arguments
            self.maximumPending = maximumPending
            self.log = log
            self.hangSeconds = hangSeconds
            self.loadBackoffLimit = loadBackoffLimit
        }
    }

    struct Pending {
        var frame: WhisperFrame
        var priority: Int
        var completion: Completion
        /// In the queue the bound counts (false: waiting for room, `waitIfFull`).
        var admitted: Bool
        /// Written to the worker running now.
        var sent = false
        /// Workers that died or hung while hearing it.
        var suspicions = 0
    }

    enum Outgoing {
        case request(UInt64)
        case cancel([UInt64])
    }

    struct State {
        var nextID: UInt64 = 1
        var pending: [UInt64: Pending] = [:]
        /// Admitted requests waiting for room, in order.
        var waitingRoom: [UInt64] = []
        var admitted = 0
        /// What the writer sends next, in order.
        var outbox: [Outgoing] = []
        /// The batch the worker said it is hearing.
        var hearing: Set<UInt64> = []
        var pid: pid_t = 0
        var stdin: Int32 = -1
        /// Pipes to workers that ended, for the writer to close: only the thread that writes to
        /// a descriptor closes it, so a write never lands on a number reused meanwhile.
        var retired: [Int32] = []
        var ready = false
        var hello: JSONValue?
        /// The worker running now has said its hello.
        var loaded = false
        var launchedAt = 0.0
        /// When the worker last sent a frame.
        var lastHeard = 0.0
        /// The pid ended for hanging, if any (its reader says why it ended).
        var hung: pid_t = 0
        var restarts = 0
        /// Requests the workers said they began to hear (a request heard again counts again).
        var startedCount = 0
        /// Workers in a row that died before they had loaded.
        var loadFailures = 0
        var stopping = false
        var generation = 0
        /// A worker was started (on demand: not before the first request).
        var launched = false
    }

    public let options: Options
    let state = Locked(State())
    let wakeWriter = DispatchSemaphore(value: 0)
    let errors = Locked<[UInt8]>([])

    /// Starts the worker and waits until it has loaded its model (`timeout` seconds), or
    /// throws what it said when it could not; `onDemand`, it starts with the first request.
    public init(options: Options, timeout: Double = 120) throws(StenoError) {
        self.options = options
        // A write to a worker that just died must fail with EPIPE, not end this process.
        Glibc.signal(SIGPIPE, SIG_IGN)
        let loaded = DispatchSemaphore(value: 0)
        if !options.onDemand {
            state.withLock { $0.launched = true }
            try launch(loaded: loaded)
        }
        let writer = Thread { [self] in writeLoop() }
        writer.name = "whisper-writer"
        writer.start()
        guard options.onDemand || (loaded.wait(timeout: .now() + timeout) == .success && isReady) else {
            stop()
            throw StenoError(.internal, "the Whisper worker did not load its model: \(lastError())")
        }
        let watchdog = Thread { [weak self] in
            while let self, self.watch() {}
        }
        watchdog.name = "whisper-watchdog"
        watchdog.start()
    }

    deinit { stop() }

    /// Whether a worker has loaded its model and serves (false while one restarts, and before
    /// one is started on demand).
    public var isReady: Bool { state.withLock { $0.ready } }
    /// Whether a worker was started (always, unless on demand and not asked yet).
    public var isStarted: Bool { state.withLock { $0.launched } }
    /// What the worker said when it had loaded its model (model, path, ctranslate2, computeType, multilingual, languages).
    public var hello: JSONValue? { state.withLock { $0.hello } }
    /// How many times the worker was started again after it died.
    public var restarts: Int { state.withLock { $0.restarts } }
    /// Requests sent and not answered yet, those waiting for room included.
    public var pendingCount: Int { state.withLock { $0.pending.count } }
    /// Requests the workers began to hear, counted by the worker's started frames (tests).
    var startedCount: Int { state.withLock { $0.startedCount } }
    /// The worker's process id (for tests that kill it).
    public var processID: pid_t { state.withLock { $0.pid } }

    /// Sends `samples` (16 kHz mono) to be recognized; `completion` is called once, from the
    /// worker's reader thread, unless the request is cancelled. Returns the request's id, or nil
    /// (and does not call it) when `maximumPending` requests are outstanding and it may not
    /// wait for room (`waitIfFull`), or the worker is stopping. `alternatives`: readings wanted in
    /// all (the beam's, so at most `beam`); `language`: the session's BCP 47 tag (a multilingual
    /// model detects the language without one); `minimumWindow`: the least encoder frames (10 ms)
    /// it is heard in, when not the worker's default (a final's). `extra`: more of the request's JSON.
    @discardableResult
    public func submit(_ samples: ArraySlice<Float>, words: Bool, priority: Int = 0, volatile: Bool? = nil, prompt: String? = nil,
                       beam: Int = 1, alternatives: Int = 0, language: String? = nil, minimumWindow: Int? = nil,
                       waitIfFull: Bool = false, extra: JSONObject = JSONObject(), completion: @escaping Completion) -> UInt64? {
        var options = extra
        // Said when the priority alone does not say it (`WhisperRecognizer.priorities`).
        if let volatile { options["volatile"] = .bool(volatile) }
        if let minimumWindow { options["minWindow"] = .number(Double(minimumWindow)) }
        options["words"] = .bool(words)
        if beam > 1 { options["beam"] = .number(Double(beam)) }
        if alternatives > 0 { options["alternatives"] = .number(Double(min(alternatives, 10))) }
        if let language { options["language"] = .string(language) }
        options["priority"] = .number(Double(priority))
        if let prompt { options["prompt"] = .string(prompt) }
        let json = JSONValue.object(options).jsonText
        var start = false
        let id: UInt64? = state.withLock { s in
            guard !s.stopping else { return nil }
            if !s.launched {
                s.launched = true
                start = true
            }
            let room = s.admitted < self.options.maximumPending
            guard room || waitIfFull else { return nil }
            let id = s.nextID
            s.nextID += 1
            let frame = WhisperFrame.request(id: id, options: json, samples: samples)
            s.pending[id] = Pending(frame: frame, priority: priority, completion: completion, admitted: room)
            if room {
                s.admitted += 1
                s.outbox.append(.request(id))
            } else {
                s.waitingRoom.append(id)
            }
            return id
        }
        if start { startOnDemand() }
        if id != nil { wakeWriter.signal() }
        return id
    }

    /// Forgets the requests `ids` (their sessions are gone): their completions are not called,
    /// and the worker is told not to hear those it has not begun.
    public func cancel(_ ids: some Collection<UInt64>) {
        guard !ids.isEmpty else { return }
        let told: Bool = state.withLock { s in
            var sent: [UInt64] = []
            for id in ids {
                guard let p = s.pending.removeValue(forKey: id) else { continue }
                if p.admitted { s.admitted -= 1 } else { s.waitingRoom.removeAll { $0 == id } }
                if p.sent { sent.append(id) }
            }
            s.outbox.removeAll { if case .request(let id) = $0 { ids.contains(id) } else { false } }
            if !sent.isEmpty { s.outbox.append(.cancel(sent)) }
            s.admitWaiting(limit: self.options.maximumPending)
            return !sent.isEmpty
        }
        if told { wakeWriter.signal() }
    }

    /// Ends the worker; what is pending fails with `internal`.
    public func stop() {
        let (pid, pending): (pid_t, [Pending]) = state.withLock { s in
            s.stopping = true
            s.ready = false
            let out = (s.pid, Array(s.pending.values))
            s.pending.removeAll()
            s.waitingRoom.removeAll()
            s.admitted = 0
            s.outbox.removeAll()
            if s.stdin >= 0 { s.retired.append(s.stdin) }
            s.stdin = -1
            return out
        }
        if pid > 0 { kill(pid, SIGKILL) }
        wakeWriter.signal()
        for p in pending { p.completion(.failure(StenoError(.internal, "the Whisper worker was stopped"))) }
    }
}

extension WhisperWorker.State {
    /// Requests waiting for room go into the queue while it has room.
    mutating func admitWaiting(limit: Int) {
        while admitted < limit, !waitingRoom.isEmpty {
            let id = waitingRoom.removeFirst()
            guard pending[id] != nil else { continue }
            pending[id]!.admitted = true
            admitted += 1
            outbox.append(.request(id))
        }
    }
}
