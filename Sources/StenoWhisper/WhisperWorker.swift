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

    init(json: JSONValue) throws(StenoError) {
        guard case .object(let o) = json, case .string(let text)? = o["text"] else {
            throw StenoError(.internal, "the Whisper worker sent a result without text")
        }
        self.text = text
        var words: [Word] = []
        if case .array(let list)? = o["words"] {
            for item in list {
                guard case .array(let w) = item, w.count == 4, case .string(let t) = w[0],
                      case .number(let s) = w[1], case .number(let e) = w[2], case .number(let p) = w[3] else { continue }
                words.append(Word(t, range: TimeRange(start: s, end: max(s, e)), confidence: p))
            }
        }
        self.words = words
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
    }
}

/// Steno's Whisper worker process, supervised: started, watched, restarted when it dies, and
/// every request it had not answered sent again to the new one, so no utterance is lost to a
/// crash. Requests wait in a bounded queue (`maximumPending`); `submit` refuses past it, which
/// is the engine's backpressure. Thread-safe; its own two threads write and read the pipes.
public final class WhisperWorker: Sendable {
    public typealias Completion = @Sendable (Result<WhisperResult, StenoError>) -> Void

    public struct Options: Sendable {
        /// The Python of the virtual environment with the worker's packages.
        public var python: String
        /// scripts/whisper_worker.py.
        public var script: String
        /// The worker's own options (`--model DIR`, `--device cuda`, `--batch N` …).
        public var arguments: [String]
        /// Requests sent and not answered, at most.
        public var maximumPending: Int
        /// Where the worker's standard error goes: a file, "-" for this process's own (nil: nowhere).
        public var log: String?
        /// Where the supervisor says that the worker died and was restarted.
        public var events: Log

        public init(python: String, script: String, arguments: [String] = [], maximumPending: Int = 256, log: String? = nil,
                    events: Log = Log()) {
            self.events = events
            self.python = python
            self.script = script
            self.arguments = arguments
            self.maximumPending = maximumPending
            self.log = log
        }
    }

    private struct Pending {
        var frame: [UInt8]
        var priority: Int
        var completion: Completion
    }

    private struct State {
        var nextID: UInt64 = 1
        var pending: [UInt64: Pending] = [:]
        /// Frames for the writer, in order; each id once.
        var outbox: [UInt64] = []
        var pid: pid_t = 0
        var stdin: Int32 = -1
        /// Pipes to workers that ended, for the writer to close: only the thread that writes to
        /// a descriptor closes it, so a write never lands on a number reused meanwhile.
        var retired: [Int32] = []
        var ready = false
        var hello: JSONValue?
        var restarts = 0
        var stopping = false
        var generation = 0
    }

    public let options: Options
    private let state = Locked(State())
    private let wakeWriter = DispatchSemaphore(value: 0)

    /// Starts the worker and waits until it has loaded its model (`timeout` seconds), or
    /// throws what it said when it could not.
    public init(options: Options, timeout: Double = 120) throws(StenoError) {
        self.options = options
        // A write to a worker that just died must fail with EPIPE, not end this process.
        Glibc.signal(SIGPIPE, SIG_IGN)
        let loaded = DispatchSemaphore(value: 0)
        try launch(loaded: loaded)
        let writer = Thread { [self] in writeLoop() }
        writer.name = "whisper-writer"
        writer.start()
        guard loaded.wait(timeout: .now() + timeout) == .success, isReady else {
            stop()
            throw StenoError(.internal, "the Whisper worker did not load its model: \(lastError())")
        }
    }

    deinit { stop() }

    /// Whether a worker has loaded its model and serves (false while one restarts).
    public var isReady: Bool { state.withLock { $0.ready } }
    /// What the worker said when it had loaded its model (model, path, ctranslate2, multilingual, languages).
    public var hello: JSONValue? { state.withLock { $0.hello } }
    /// How many times the worker was started again after it died.
    public var restarts: Int { state.withLock { $0.restarts } }
    /// Requests sent and not answered yet.
    public var pendingCount: Int { state.withLock { $0.pending.count } }
    /// The worker's process id (for tests that kill it).
    public var processID: pid_t { state.withLock { $0.pid } }

    /// Sends `samples` (16 kHz mono) to be recognized; `completion` is called once, from the
    /// worker's reader thread. Returns false (and does not call it) when `maximumPending`
    /// requests are outstanding or the worker is stopping. `alternatives`: readings wanted in
    /// all (the beam's, so at most `beam`); `language`: the session's BCP 47 tag (a multilingual
    /// model detects the language without one).
    @discardableResult
    public func submit(_ samples: ArraySlice<Float>, words: Bool, priority: Int = 0, prompt: String? = nil, beam: Int = 1,
                       alternatives: Int = 0, language: String? = nil, completion: @escaping Completion) -> Bool {
        var options = JSONObject()
        options["words"] = .bool(words)
        if beam > 1 { options["beam"] = .number(Double(beam)) }
        if alternatives > 0 { options["alternatives"] = .number(Double(min(alternatives, 10))) }
        if let language { options["language"] = .string(language) }
        options["priority"] = .number(Double(priority))
        if let prompt { options["prompt"] = .string(prompt) }
        let json = JSONValue.object(options).jsonText
        let accepted: Bool = state.withLock { s in
            guard !s.stopping, s.pending.count < self.options.maximumPending else { return false }
            let id = s.nextID
            s.nextID += 1
            let frame = WhisperFrame.request(id: id, options: json, samples: samples).encoded
            s.pending[id] = Pending(frame: frame, priority: priority, completion: completion)
            s.outbox.append(id)
            return true
        }
        if accepted { wakeWriter.signal() }
        return accepted
    }

    /// Ends the worker; what is pending fails with `internal`.
    public func stop() {
        let (pid, pending): (pid_t, [Pending]) = state.withLock { s in
            s.stopping = true
            s.ready = false
            let out = (s.pid, Array(s.pending.values))
            s.pending.removeAll()
            s.outbox.removeAll()
            if s.stdin >= 0 { s.retired.append(s.stdin) }
            s.stdin = -1
            return out
        }
        if pid > 0 { kill(pid, SIGKILL) }
        wakeWriter.signal()
        for p in pending { p.completion(.failure(StenoError(.internal, "the Whisper worker was stopped"))) }
    }

    // MARK: -

    private func launch(loaded: DispatchSemaphore?) throws(StenoError) {
        let child: SpawnedChild
        do {
            child = try spawnChild(options.python, [options.script] + options.arguments, stdin: .pipe, stdout: .pipe,
                                   stderr: options.log.map { $0 == "-" ? .inherit : .file($0, append: true) } ?? .pipe)
        } catch {
            throw StenoError(.internal, "cannot start the Whisper worker (\(options.python) \(options.script)): \(error); "
                             + "scripts/bootstrap.sh run installs it")
        }
        let generation: Int = state.withLock { s in
            s.pid = child.pid
            s.stdin = child.stdin ?? -1
            s.ready = false
            s.generation += 1
            return s.generation
        }
        if let errors = child.stderr {
            let t = Thread { [self] in drainErrors(errors) }
            t.start()
        }
        let reader = Thread { [self] in readLoop(child.stdout ?? -1, pid: child.pid, generation: generation, loaded: loaded) }
        reader.name = "whisper-reader"
        reader.start()
    }

    private let errors = Locked<[UInt8]>([])

    private func lastError() -> String {
        let text = String(decoding: errors.withLock { $0 }, as: UTF8.self).trimmingCharacters(in: .whitespacesAndNewlines)
        return text.isEmpty ? "it ended without saying why" : String(text.suffix(400))
    }

    private func drainErrors(_ fd: Int32) {
        var buffer = [UInt8](repeating: 0, count: 4096)
        while true {
            let n = read(fd, &buffer, buffer.count)
            if n <= 0 { break }
            errors.withLock { e in
                e += buffer[0..<n]
                if e.count > 8192 { e.removeFirst(e.count - 8192) }
            }
        }
        close(fd)
    }

    private func readExactly(_ fd: Int32, _ count: Int) -> [UInt8]? {
        var out = [UInt8](repeating: 0, count: count)
        var got = 0
        while got < count {
            let n = out.withUnsafeMutableBytes { read(fd, $0.baseAddress! + got, count - got) }
            if n < 0 && errno == EINTR { continue }
            if n <= 0 { return nil }
            got += n
        }
        return out
    }

    private func readLoop(_ fd: Int32, pid: pid_t, generation: Int, loaded: DispatchSemaphore?) {
        var loaded = loaded
        while true {
            guard let header = readExactly(fd, 4), let length = try? WhisperFrame.length(header: header),
                  let rest = readExactly(fd, length), let frame = try? WhisperFrame(rest: rest) else { break }
            let json = try? JSONParser().parse(frame.json)
            switch frame.kind {
            case .hello:
                state.withLock { s in
                    s.ready = true
                    s.hello = json
                }
                loaded?.signal()
                loaded = nil
            case .result, .error:
                guard let done = state.withLock({ $0.pending.removeValue(forKey: frame.id) }) else { continue }
                if frame.kind == .error {
                    var message = "the Whisper worker failed"
                    if case .object(let o)? = json, case .string(let m)? = o["message"] { message += ": \(m)" }
                    done.completion(.failure(StenoError(.internal, message)))
                } else {
                    do throws(StenoError) {
                        done.completion(.success(try WhisperResult(json: json ?? .null)))
                    } catch {
                        done.completion(.failure(error))
                    }
                }
            case .request:
                continue
            }
        }
        close(fd)
        _ = waitForExit(pid)
        loaded?.signal()
        // It died (or was stopped): start another and send it everything unanswered.
        let restart: Bool = state.withLock { s in
            guard !s.stopping, s.generation == generation, s.hello != nil else { return false }
            s.ready = false
            if s.stdin >= 0 { s.retired.append(s.stdin) }
            s.stdin = -1
            s.restarts += 1
            s.outbox = s.pending.sorted { ($0.value.priority, $1.key) > ($1.value.priority, $0.key) }.map(\.key)
            return true
        }
        guard restart else { return }
        options.events.error("the Whisper worker (pid \(pid)) ended: \(lastError()); starting another")
        var delay = 0.2
        while !state.withLock({ $0.stopping }) {
            do throws(StenoError) {
                try launch(loaded: nil)
                wakeWriter.signal()
                return
            } catch {
                options.events.error("\(error.message); trying again in \(delay) s")
                Thread.sleep(forTimeInterval: delay)
                delay = min(5, delay * 2)
            }
        }
    }

    private func writeLoop() {
        while true {
            wakeWriter.wait()
            while true {
                let next: (fd: Int32, frame: [UInt8])?? = state.withLock { s in
                    for fd in s.retired { close(fd) }
                    s.retired.removeAll()
                    if s.stopping { return .some(nil) }
                    guard s.stdin >= 0, !s.outbox.isEmpty else { return nil }
                    let id = s.outbox.removeFirst()
                    guard let p = s.pending[id] else { return .some((-1, [])) }
                    return .some((s.stdin, p.frame))
                }
                guard let item = next else { break }
                guard let (fd, frame) = item else { return }
                guard fd >= 0 else { continue }
                var written = 0
                while written < frame.count {
                    let n = frame.withUnsafeBytes { write(fd, $0.baseAddress! + written, frame.count - written) }
                    if n < 0 && errno == EINTR { continue }
                    if n <= 0 { break }  // the worker died: its reader re-sends what is pending
                    written += n
                }
            }
        }
    }
}
