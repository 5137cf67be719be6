import Foundation
import StenoAudio
import StenoCore
import StenoServer
import StenoSpeech
import StenoSystem
import StenoTestSupport
import Synchronization
import Testing

// Real servers in the test process, `steno send` and `steno listen` as subprocesses that
// talk to them over real sockets, and the audio they send.

/// One speech engine for every server of these tests (each session gets its own decoder).
enum CLIEngine {
    static let engine: PocketSphinxEngine = {
        do throws(StenoError) {
            return try PocketSphinxEngine(configuration: PocketSphinxConfiguration(recognizers: 8))
        } catch {
            fatalError("the pocketsphinx model cannot be loaded: \(error.message)")
        }
    }()
}

/// A server on 127.0.0.1, any free port.
final class CLIServer: @unchecked Sendable {
    let server: StenoServer
    let port: Int
    var url: String { "ws://127.0.0.1:\(port)" }

    /// The one most tests share (sessions do not disturb each other).
    static let shared: CLIServer = {
        do {
            return try CLIServer()
        } catch {
            fatalError("cannot start the test server: \(error)")
        }
    }()

    init(_ configure: (inout ServerOptions) -> Void = { _ in }) throws {
        var options = ServerOptions()
        options.host = "127.0.0.1"
        options.port = 0
        options.maxSessions = 16
        options.workers = 2
        // Decoders made ahead for the sessions, as `steno serve` makes on a two-core machine.
        options.recognizers = 8
        // Tests stream in parallel on a busy machine: admission by the connection limit only.
        options.lagTarget = 0
        options.keepAlive = nil
        options.limits.idleTimeoutSeconds = 0
        // A resume on a loaded machine can take longer than the 2 s after which a stalled
        // utterance is finalized; the resume tests compare with an uninterrupted session.
        options.limits.stallSeconds = 30
        configure(&options)
        server = StenoServer(options: options, engine: CLIEngine.engine, log: .silent)
        port = try server.start()
    }

    func stop() { server.stop() }
}

/// Bytes a child writes to a pipe, as they come.
final class Collected: Sendable {
    private let state = Locked<(data: Data, ended: Bool)>((Data(), false))

    func append(_ data: Data) {
        state.withLock { s in
            if data.isEmpty { s.ended = true } else { s.data.append(data) }
        }
    }

    var text: String { String(decoding: state.withLock { $0.data }, as: UTF8.self) }
    var lines: [String] { text.split(separator: "\n", omittingEmptySubsequences: true).map(String.init) }
    var ended: Bool { state.withLock { $0.ended } }
}

/// A `steno` command running as a subprocess, spawned without inheriting any other open file
/// (tests run in parallel: a child holding another test's pipe would keep it from ending).
final class StenoCommand: @unchecked Sendable {
    static let binary: String = Bundle.module.bundleURL.deletingLastPathComponent().appendingPathComponent("steno").path

    let pid: pid_t
    let stdout = Collected()
    let stderr = Collected()
    let arguments: [String]
    private let exit = Locked<Int32?>(nil)

    /// Starts `steno ARGUMENTS`; `input` is written to its standard input (then closed) when
    /// given, else standard input is empty. `environment` is added to this process's.
    init(_ arguments: [String], input: Data? = nil, environment: [String: String] = [:],
         executable: String = StenoCommand.binary) throws {
        self.arguments = arguments
        // It installs its own signal handlers: it starts with clean ones (spawnChild).
        let child = try spawnChild(executable, arguments, stdin: .pipe, stdout: .pipe, stderr: .pipe,
                                   environment: environment)
        pid = child.pid
        let (inWrite, outRead, errRead) = (child.stdin!, child.stdout!, child.stderr!)
        for (fd, sink) in [(outRead, stdout), (errRead, stderr)] {
            Thread {
                var buffer = [UInt8](repeating: 0, count: 16 * 1024)
                while true {
                    let n = buffer.withUnsafeMutableBytes { read(fd, $0.baseAddress, $0.count) }
                    if n < 0 && errno == EINTR { continue }
                    if n <= 0 { break }
                    sink.append(Data(buffer[0..<n]))
                }
                close(fd)
                sink.append(Data())
            }.start()
        }
        Thread {
            if let input {
                var offset = 0
                let bytes = [UInt8](input)
                while offset < bytes.count {
                    let n = bytes.withUnsafeBytes { write(inWrite, $0.baseAddress! + offset, $0.count - offset) }
                    if n < 0 && errno == EINTR { continue }
                    if n <= 0 { break }
                    offset += n
                }
            }
            close(inWrite)
        }.start()
    }

    deinit {
        if status == nil {
            kill(pid, SIGKILL)
            _ = status(waiting: true)
        }
    }

    /// The exit status once the child has ended (128 + the signal when a signal ended it).
    var status: Int32? { status(waiting: false) }

    private func status(waiting: Bool) -> Int32? {
        exit.withLock { known in
            if let known { return known }
            var raw: Int32 = 0
            var rc: pid_t
            repeat { rc = waitpid(pid, &raw, waiting ? 0 : WNOHANG) } while rc < 0 && errno == EINTR
            guard rc == pid else { return nil }
            let code = exitStatus(fromWaitStatus: raw)
            known = code
            return code
        }
    }

    var isRunning: Bool { status == nil }

    /// Waits until `condition` holds (a guard against hanging, not a timing assertion).
    func wait(for what: String, timeout: Double = 60, _ condition: () -> Bool) throws {
        let deadline = Deadline(timeout)
        while !condition() {
            if deadline.hasPassed {
                throw TestClientError.timeout("\(what); steno \(arguments.joined(separator: " ")): stdout \(stdout.text) stderr \(stderr.text)")
            }
            if !isRunning && stdout.ended && stderr.ended && !condition() {
                throw TestClientError.closed("steno \(arguments.joined(separator: " ")) ended (\(status ?? -1)) before \(what): stdout \(stdout.text) stderr \(stderr.text)")
            }
            usleep(10_000)
        }
    }

    func waitForStdout(lines count: Int, timeout: Double = 60) throws {
        try wait(for: "\(count) lines of stdout", timeout: timeout) { stdout.lines.count >= count }
    }

    func waitForStderr(_ text: String, timeout: Double = 60) throws {
        try wait(for: "'\(text)' on stderr", timeout: timeout) { stderr.text.contains(text) }
    }

    func interrupt() { kill(pid, SIGINT) }

    /// Waits for the command to end; its exit status.
    @discardableResult
    func finish(timeout: Double = 120) throws -> Int32 {
        let deadline = Deadline(timeout)
        while isRunning || !stdout.ended || !stderr.ended {
            if deadline.hasPassed {
                kill(pid, SIGKILL)
                throw TestClientError.timeout("steno \(arguments.joined(separator: " ")) did not end: stdout \(stdout.text) stderr \(stderr.text)")
            }
            usleep(10_000)
        }
        return status ?? -1
    }

    /// Runs a command to its end.
    static func run(_ arguments: [String], input: Data? = nil, environment: [String: String] = [:],
                    timeout: Double = 120) throws -> (status: Int32, stdout: String, stderr: String) {
        let command = try StenoCommand(arguments, input: input, environment: environment)
        let status = try command.finish(timeout: timeout)
        return (status, command.stdout.text, command.stderr.text)
    }
}

/// The test audio, and what `steno transcribe` makes of it.
enum TestAudio {
    static func resource(_ name: String) -> String {
        Bundle.module.url(forResource: "Resources/\(name)", withExtension: nil)!.path
    }

    /// Beckett, 16 kHz mono 16-bit, 9.97 s: five finals.
    static let beckett = resource("beckett.wav")

    /// Its first 4.5 s (three finals): the short audio most tests send.
    static let clip: String = {
        do throws(StenoError) {
            let wav = try WAVFile(path: beckett)
            let clip = WAVFile(sampleRate: wav.sampleRate, channels: 1, samples: Array(wav.samples.prefix(wav.sampleRate * 9 / 2)))
            let path = FileManager.default.temporaryDirectory.appendingPathComponent("steno-clip-\(getpid()).wav").path
            try clip.write(path: path)
            return path
        } catch {
            fatalError("cannot make the test clip: \(error.message)")
        }
    }()

    /// The clip's samples as raw 16-bit PCM.
    static let clipRaw: Data = {
        do throws(StenoError) {
            return Data(try WAVFile(path: clip).s16leBytes)
        } catch {
            fatalError("cannot read the test clip: \(error.message)")
        }
    }()

    private static let transcripts = Locked<[String: String]>([:])

    /// `steno transcribe FILE --format FORMAT`'s output (each made once), with `--endpointing
    /// ENDPOINTING` if given (to compare with a `steno serve` process, whose default is not
    /// `steno transcribe`'s: `ServeInstance.endpointing`).
    static func transcribed(_ path: String, format: String = "text", endpointing: String? = nil) throws -> String {
        let key = path + "|" + format + "|" + (endpointing ?? "")
        if let known = transcripts.withLock({ $0[key] }) { return known }
        let result = try StenoCommand.run(["transcribe", "--engine", "pocketsphinx", path, "--format", format, "--no-progress"]
                                          + (endpointing.map { ["--endpointing", $0] } ?? []))
        guard result.status == 0 else { throw TestClientError.protocolError("transcribe failed: \(result.stderr)") }
        transcripts.withLock { $0[key] = result.stdout }
        return result.stdout
    }

    /// The `final` events of JSON lines, without their `seq` (which depends on what else the
    /// connection carried).
    static func finals(ofJSONLines text: String) -> [JSONValue] {
        text.split(separator: "\n").compactMap { line -> JSONValue? in
            guard case .object(var object)? = try? JSONParser().parse(String(line)),
                  object["type"] == .string("final") else { return nil }
            object["seq"] = nil
            return .object(object)
        }
    }

    /// The ranges of `[start → end] text` lines, to check that finals never repeat or overlap.
    static func ranges(ofText text: String) -> [(Double, Double)] {
        text.split(separator: "\n").compactMap { line in
            guard let m = line.wholeMatch(of: /\[(\d\d):(\d\d):(\d\d)\.(\d\d\d) → (\d\d):(\d\d):(\d\d)\.(\d\d\d)\] .+/) else { return nil }
            func seconds(_ h: Substring, _ m: Substring, _ s: Substring, _ ms: Substring) -> Double {
                Double(h)! * 3600 + Double(m)! * 60 + Double(s)! + Double(ms)! / 1000
            }
            return (seconds(m.1, m.2, m.3, m.4), seconds(m.5, m.6, m.7, m.8))
        }
    }
}

/// A listener on 127.0.0.1 that answers every request with one canned HTTP response and
/// hangs up: what a proxy in front of the server that refuses the client looks like (a 403
/// from an access rule, say), since Steno itself answers 403 only to a browser's `Origin`.
final class CannedHTTPServer: @unchecked Sendable {
    let port: Int
    private let listener: Int32
    private let stopping = Atomic<Bool>(false)
    private let served = Atomic<Int>(0)

    init(response: String) throws {
        (listener, port) = try loopbackListener()
        let bytes = Array(response.utf8)
        Thread { [self] in
            while !stopping.load(ordering: .relaxed) {
                let client = accept(listener, nil, nil)
                if client < 0 {
                    if errno == EINTR { continue }
                    return
                }
                // The request head, then the answer.
                var request = [UInt8]()
                var buffer = [UInt8](repeating: 0, count: 4096)
                while !request.ends(with: Array("\r\n\r\n".utf8)) && request.count < 65536 {
                    let n = buffer.withUnsafeMutableBytes { read(client, $0.baseAddress, $0.count) }
                    if n < 0 && errno == EINTR { continue }
                    if n <= 0 { break }
                    request += buffer[0..<n]
                }
                _ = bytes.withUnsafeBytes { write(client, $0.baseAddress, $0.count) }
                shutdown(client, Int32(SHUT_WR))
                close(client)
                served.add(1, ordering: .relaxed)
            }
        }.start()
    }

    /// Requests answered so far.
    var servedCount: Int { served.load(ordering: .relaxed) }

    func stop() {
        guard !stopping.exchange(true, ordering: .relaxed) else { return }
        shutdown(listener, Int32(SHUT_RDWR))
        close(listener)
    }

    deinit { stop() }
}

extension Array where Element == UInt8 {
    fileprivate func ends(with suffix: [UInt8]) -> Bool { count >= suffix.count && Array(self[(count - suffix.count)...]) == suffix }
}

/// `steno serve` in a process of its own, which a test can stop as a supervisor does
/// (SIGTERM: the drain, finals, then 1001 `shutting_down`) and start again on the same port.
final class ServeProcess: @unchecked Sendable {
    let command: StenoCommand
    let port: Int
    var url: String { "ws://127.0.0.1:\(port)" }

    /// Starts a server on `port` (0: a free one) and waits until it listens. `engine`: its
    /// `--engine` (nil: the default, Whisper).
    init(port: Int = 0, engine: String? = "pocketsphinx", arguments: [String] = []) throws {
        // As the in-process test servers: admission by the connection limit only, no idle or
        // stall timeouts (tests stream in parallel on a busy machine).
        let serve = try StenoCommand(["serve", "--host", "127.0.0.1", "--port", String(port), "--recognizers", "2",
                                      "--workers", "2", "--lag-target", "0", "--idle-timeout", "0", "--stall-seconds", "30",
                                      "--log-level", "warning"] + (engine.map { ["--engine", $0] } ?? []) + arguments)
        try serve.wait(for: "the server's first line") { serve.stdout.text.contains("\n") }
        guard let match = serve.stdout.text.firstMatch(of: /listening on http:\/\/127\.0\.0\.1:(\d+)\n/),
              let listening = Int(match.1) else {
            throw TestClientError.protocolError("steno serve said: \(serve.stdout.text) \(serve.stderr.text)")
        }
        command = serve
        self.port = listening
    }

    /// SIGTERM, and its exit status once it has drained.
    @discardableResult
    func terminate() throws -> Int32 {
        if command.isRunning { kill(command.pid, SIGTERM) }
        return try command.finish()
    }
}

extension ServeProcess {
    /// A new server on the port of one that has stopped (tried again while the port is still
    /// taken: a guard, for a kernel slow to release it).
    static func restart(on port: Int) throws -> ServeProcess {
        var attempts = 0
        while true {
            do {
                return try ServeProcess(port: port)
            } catch {
                attempts += 1
                if attempts >= 20 { throw error }
                usleep(250_000)
            }
        }
    }
}
