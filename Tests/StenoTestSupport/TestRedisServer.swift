import Foundation
import StenoSystem

/// Debian's `redis-server` on a free loopback port (127.0.0.1, and ::1 where there is IPv6), with
/// no persistence, for the tests that need a real one; stopped by `stop()` or, failing that, when
/// it is released (SIGKILL).
/// Its output goes to a log file in its own temporary folder.
public final class TestRedisServer: @unchecked Sendable {
    public static let binary = "/usr/bin/redis-server"
    public static var isInstalled: Bool { FileManager.default.isExecutableFile(atPath: binary) }
    public static let missing = "redis-server is not installed (scripts/bootstrap.sh test installs Debian's redis-server)"

    public let port: Int
    public let directory: URL
    private var pid: pid_t = 0
    public var url: String { "redis://127.0.0.1:\(port)" }

    /// Starts one on `port` (nil: a free one) and waits until it answers.
    public init(port: Int? = nil) throws {
        directory = FileManager.default.temporaryDirectory.appendingPathComponent("steno-redis-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        self.port = try port ?? freeLoopbackPort()
        try start()
    }

    deinit { kill(signal: SIGKILL) }

    /// Starts it again on the same port (after `stop()`), with nothing in it.
    public func start() throws {
        guard pid == 0 else { return }
        pid = try spawnQuietly(Self.binary, [
            "--port", "\(port)", "--bind", "127.0.0.1", "-::1", "--save", "", "--appendonly", "no",
            "--dir", directory.path, "--logfile", directory.appendingPathComponent("redis.log").path,
        ])
        let deadline = Date().addingTimeInterval(20)
        while !Self.answersPing(port: port) {
            if Date() > deadline {
                stop()
                throw TestClientError.timeout("redis-server on port \(port) did not answer: \(log)")
            }
            usleep(20_000)
        }
    }

    /// Stops it (SIGTERM, then SIGKILL if it is still there after 5 s) and waits for it to go.
    public func stop() { kill(signal: SIGTERM) }

    private func kill(signal: Int32) {
        guard pid != 0 else { return }
        Glibc.kill(pid, signal)
        var status: Int32 = 0
        let deadline = Date().addingTimeInterval(5)
        while true {
            let rc = waitpid(pid, &status, WNOHANG)
            if rc == pid || (rc < 0 && errno != EINTR) { break }
            if Date() > deadline {
                Glibc.kill(pid, SIGKILL)
                while waitpid(pid, &status, 0) < 0 && errno == EINTR {}
                break
            }
            usleep(10_000)
        }
        pid = 0
    }

    public var log: String {
        (try? String(contentsOf: directory.appendingPathComponent("redis.log"), encoding: .utf8)) ?? ""
    }

    public func remove() {
        stop()
        try? FileManager.default.removeItem(at: directory)
    }

    /// Whether a Redis server on 127.0.0.1:`port` answers PING.
    static func answersPing(port: Int) -> Bool {
        guard let stream = try? TestStream.tcp(port: port) else { return false }
        defer { stream.close() }
        guard (try? stream.write(Array("*1\r\n$4\r\nPING\r\n".utf8), timeout: 1)) != nil else { return false }
        guard let reply = try? stream.read(exactly: 7, deadline: Deadline(1)) else { return false }
        return reply == Array("+PONG\r\n".utf8)
    }
}

/// Starts `executable ARGUMENTS` with standard input, output and error on /dev/null.
public func spawnQuietly(_ executable: String, _ arguments: [String]) throws -> pid_t {
    try spawnChild(executable, arguments).pid
}
