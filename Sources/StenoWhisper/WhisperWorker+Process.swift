import Foundation
import StenoCore
import StenoSystem

// The worker process itself: started with its frames on descriptors of their own, its frames
// read and written by two threads, watched for hanging, and started again when it ends.
extension WhisperWorker {
    func launch(loaded: DispatchSemaphore?) throws(StenoError) {
        let child: SpawnedChild
        do {
            // Requests on descriptor 3, results on 4: what a library prints on the worker's standard
            // output (which it sends to its standard error) cannot corrupt them.
            child = try spawnChild(options.python, [options.script, "--frames-in", "3", "--frames-out", "4"] + options.arguments,
                                   stdin: .null, stdout: .null,
                                   stderr: options.log.map { $0 == "-" ? .inherit : .file($0, append: true) } ?? .pipe,
                                   extraPipes: [.toChild, .fromChild])
        } catch {
            throw StenoError(.internal, "cannot start the Whisper worker (\(options.python) \(options.script)): \(error); "
                             + "scripts/bootstrap.sh run installs it")
        }
        let generation: Int = state.withLock { s in
            s.pid = child.pid
            s.stdin = child.extra[0]
            s.ready = false
            s.loaded = false
            s.hearing = []
            s.launchedAt = SystemClock.now()
            s.lastHeard = s.launchedAt
            s.generation += 1
            return s.generation
        }
        if let errors = child.stderr {
            let t = Thread { [self] in drainErrors(errors) }
            t.start()
        }
        let reader = Thread { [self] in readLoop(child.extra[1], pid: child.pid, generation: generation, loaded: loaded) }
        reader.name = "whisper-reader"
        reader.start()
    }

    /// The first request's start of a worker on demand: what cannot start fails what waits for it.
    func startOnDemand() {
        do throws(StenoError) {
            try launch(loaded: nil)
            options.events.info("the Whisper worker for \(options.arguments.joined(separator: " ")) started on its first request")
        } catch {
            failUnloaded(error)
        }
    }

    /// A worker started on demand that never loaded: what waits for it fails (with why), and the
    /// next request starts another.
    func failUnloaded(_ error: StenoError) {
        let failed: [Pending] = state.withLock { s in
            s.launched = false
            s.ready = false
            if s.stdin >= 0 { s.retired.append(s.stdin) }
            s.stdin = -1
            s.pid = 0
            s.hearing = []
            s.outbox.removeAll()
            s.waitingRoom.removeAll()
            s.admitted = 0
            defer { s.pending.removeAll() }
            return Array(s.pending.values)
        }
        wakeWriter.signal()
        options.events.error(error.message)
        for p in failed { p.completion(.failure(error)) }
    }

    func lastError() -> String {
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
            let now = SystemClock.now()
            switch frame.kind {
            case .hello:
                state.withLock { s in
                    s.ready = true
                    s.loaded = true
                    s.loadFailures = 0
                    s.hello = json
                    s.lastHeard = now
                }
                loaded?.signal()
                loaded = nil
            case .started:
                var ids: Set<UInt64> = []
                if case .object(let o)? = json, case .array(let list)? = o["ids"] {
                    for case .number(let id) in list where id >= 0 { ids.insert(UInt64(id)) }
                }
                state.withLock { s in
                    s.hearing = ids
                    s.startedCount += ids.count
                    s.lastHeard = now
                }
            case .result, .error:
                let done: Pending? = state.withLock { s in
                    s.lastHeard = now
                    s.hearing.remove(frame.id)
                    guard let p = s.pending.removeValue(forKey: frame.id) else { return nil }
                    if p.admitted { s.admitted -= 1 }
                    s.admitWaiting(limit: options.maximumPending)
                    return p
                }
                guard let done else { continue }
                wakeWriter.signal()
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
            case .request, .cancel:
                continue
            }
        }
        close(fd)
        _ = waitForExit(pid)
        loaded?.signal()
        restart(after: pid, generation: generation)
    }

    /// The worker `pid` ended (or was ended): what it was hearing is suspect (heard again alone,
    /// or failed the second time), another is started (after a pause if it keeps dying while
    /// loading) and is sent everything unanswered, finals first.
    private func restart(after pid: pid_t, generation: Int) {
        typealias Outcome = (restart: Bool, failed: [Pending], delay: Double, hung: Bool, loading: Int)
        let unloaded = state.withLock { s in !s.stopping && s.generation == generation && s.hello == nil && options.onDemand }
        if unloaded {
            failUnloaded(StenoError(.internal, "the Whisper worker did not load its model: \(lastError())"))
            return
        }
        let outcome: Outcome = state.withLock { s in
            guard !s.stopping, s.generation == generation, s.hello != nil else { return (false, [], 0, false, 0) }
            s.ready = false
            if s.stdin >= 0 { s.retired.append(s.stdin) }
            s.stdin = -1
            s.restarts += 1
            if !s.loaded { s.loadFailures += 1 }
            var failed: [Pending] = []
            for id in s.hearing {
                guard var p = s.pending[id] else { continue }
                p.suspicions += 1
                if p.suspicions >= 2 {
                    s.pending[id] = nil
                    if p.admitted { s.admitted -= 1 }
                    failed.append(p)
                } else {
                    p.frame = p.frame.heardAlone()
                    s.pending[id] = p
                }
            }
            s.hearing = []
            s.admitWaiting(limit: options.maximumPending)
            for id in s.pending.keys { s.pending[id]!.sent = false }
            let order = s.pending.filter { $0.value.admitted }.sorted { ($0.value.priority, $1.key) > ($1.value.priority, $0.key) }
            s.outbox = order.map { .request($0.key) }
            let delay = s.loadFailures == 0 ? 0 : min(options.loadBackoffLimit, 0.5 * pow(2, Double(s.loadFailures - 1)))
            return (true, failed, delay, s.hung == pid, s.loadFailures)
        }
        guard outcome.restart else { return }
        for p in outcome.failed {
            p.completion(.failure(StenoError(.internal, "the Whisper worker failed twice while hearing this request (it ended or hung)")))
        }
        let why = outcome.hung ? "hung for \(options.hangSeconds) s: ended it" : "ended: \(lastError())"
        let when = outcome.delay > 0 ? "in \(outcome.delay) s (it died while loading \(outcome.loading) times in a row)" : "now"
        options.events.error("the Whisper worker (pid \(pid)) \(why); starting another \(when)"
                             + (outcome.failed.isEmpty ? "" : "; \(outcome.failed.count) request(s) failed"))
        var delay = outcome.delay
        while !state.withLock({ $0.stopping }) {
            if delay > 0 {
                let until = SystemClock.now() + delay
                while SystemClock.now() < until, !state.withLock({ $0.stopping }) { Thread.sleep(forTimeInterval: 0.05) }
                if state.withLock({ $0.stopping }) { return }
            }
            do throws(StenoError) {
                try launch(loaded: nil)
                wakeWriter.signal()
                return
            } catch {
                delay = min(options.loadBackoffLimit, max(0.2, delay * 2))
                options.events.error("\(error.message); trying again in \(delay) s")
            }
        }
    }

    /// One look at the worker (the watchdog's thread): ended if it has heard one batch for
    /// `hangSeconds` without a word, or loaded for 120 s without its hello. False once stopping.
    func watch() -> Bool {
        Thread.sleep(forTimeInterval: min(1, max(0.05, options.hangSeconds / 8)))
        let now = SystemClock.now()
        let (stopping, hung): (Bool, pid_t) = state.withLock { s in
            guard !s.stopping else { return (true, 0) }
            guard s.pid > 0, s.hung != s.pid else { return (false, 0) }
            let stuck = s.ready ? !s.hearing.isEmpty && now - s.lastHeard > options.hangSeconds : now - s.launchedAt > 120
            if stuck { s.hung = s.pid }
            return (false, stuck ? s.pid : 0)
        }
        if hung > 0 { kill(hung, SIGKILL) }
        return !stopping
    }

    func writeLoop() {
        while true {
            wakeWriter.wait()
            while true {
                let next: (fd: Int32, frame: [UInt8])?? = state.withLock { s in
                    for fd in s.retired { close(fd) }
                    s.retired.removeAll()
                    if s.stopping { return .some(nil) }
                    guard s.stdin >= 0, !s.outbox.isEmpty else { return nil }
                    switch s.outbox.removeFirst() {
                    case .cancel(let ids):
                        return .some((s.stdin, WhisperFrame.cancel(ids).encoded))
                    case .request(let id):
                        guard s.pending[id] != nil else { return .some((-1, [])) }
                        s.pending[id]!.sent = true
                        return .some((s.stdin, s.pending[id]!.frame.encoded))
                    }
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

extension WhisperFrame {
    /// This request asking to be heard in a batch of its own (`"alone":true`).
    func heardAlone() -> WhisperFrame {
        guard case .object(var options)? = try? JSONParser().parse(json) else { return self }
        options["alone"] = .bool(true)
        var frame = self
        frame.json = Array(JSONValue.object(options).jsonText.utf8)
        return frame
    }
}
