import Foundation
import StenoSystem
import Glibc

/// A child process that a benchmark or a test runs and watches: its pid, its stdout (if
/// captured), its stdin (if fed), its port, its CPU and memory from /proc, its end.
public final class Child: @unchecked Sendable {
    public let pid: pid_t
    public let stdoutFD: Int32?
    /// The write end of its standard input, with `spawn(…, stdin: true)`; close it to end
    /// the input.
    public let stdinFD: Int32?
    /// What `readPort` has read of its stdout, for a message when no port came.
    public private(set) var readSoFar = ""

    private init(_ spawned: SpawnedChild) {
        pid = spawned.pid
        stdoutFD = spawned.stdout
        stdinFD = spawned.stdin
    }

    /// Starts `path ARGUMENTS` (`spawnChild`); standard error goes to `stderrPath`
    /// (appended), or nowhere; standard input is a pipe with `stdin` (``stdinFD``), else empty.
    public convenience init(_ path: String, _ arguments: [String], stdout capture: Bool, stdin feed: Bool = false,
                            stderrPath: String? = nil) throws {
        self.init(try spawnChild(path, arguments, stdin: feed ? .pipe : .null, stdout: capture ? .pipe : .null,
                                 stderr: stderrPath.map { .file($0, append: true) } ?? .null))
    }

    /// As `init`, nil when the program cannot be started (the benchmarks report a row as not
    /// measured rather than stop).
    public static func spawn(_ path: String, _ arguments: [String], stdout capture: Bool, stdin feed: Bool = false,
                             stderrPath: String? = nil) -> Child? {
        try? Child(path, arguments, stdout: capture, stdin: feed, stderrPath: stderrPath)
    }

    /// Reads stdout until the `listening on http://host:PORT` line, for at most `timeout`
    /// seconds; nil if it closes stdout or the time passes first. It reads byte by byte, so
    /// that what follows the line is left for `readAllStdout`.
    public func readPort(timeout: Double = .infinity) -> Int? {
        guard let fd = stdoutFD else { return nil }
        let deadline = timeout.isFinite ? Deadline(timeout) : nil
        var line = ""
        var byte: UInt8 = 0
        while true {
            if let deadline {
                var p = pollfd(fd: fd, events: Int16(POLLIN), revents: 0)
                let ready = poll(&p, 1, Int32(max(0, min(1000, deadline.remainingMilliseconds))))
                if ready < 0 && errno != EINTR { return nil }
                if ready <= 0 {
                    if deadline.hasPassed { return nil }
                    continue
                }
            }
            let n = read(fd, &byte, 1)
            if n < 0 && errno == EINTR { continue }
            guard n == 1 else { return nil }
            readSoFar.append(Character(UnicodeScalar(byte)))
            if byte == UInt8(ascii: "\n") {
                if let range = line.range(of: "listening on "), let colon = line[range.upperBound...].lastIndex(of: ":") {
                    return Int(line[line.index(after: colon)...].trimmingCharacters(in: .whitespaces))
                }
                line = ""
            } else {
                line.append(Character(UnicodeScalar(byte)))
            }
        }
    }

    /// Everything it writes to stdout until it closes it.
    public func readAllStdout() -> String {
        guard let fd = stdoutFD else { return "" }
        var bytes: [UInt8] = []
        var buffer = [UInt8](repeating: 0, count: 4096)
        while true {
            let n = buffer.withUnsafeMutableBytes { read(fd, $0.baseAddress, $0.count) }
            if n > 0 { bytes += buffer[0..<n] } else if n < 0 && errno == EINTR { continue } else { break }
        }
        return String(decoding: bytes, as: UTF8.self)
    }

    /// User + system CPU seconds so far (/proc/PID/stat).
    public func cpuSeconds() -> Double {
        guard let stat = try? String(contentsOfFile: "/proc/\(pid)/stat", encoding: .utf8),
              let close = stat.lastIndex(of: ")") else { return 0 }
        let fields = stat[stat.index(after: close)...].split(separator: " ")
        // After the command: state is field 3 → utime is field 14, stime 15 (1-based in proc(5)).
        guard fields.count > 13, let user = Double(fields[11]), let system = Double(fields[12]) else { return 0 }
        return (user + system) / Double(sysconf(Int32(_SC_CLK_TCK)))
    }

    /// Resident memory now, in MB (/proc/PID/status VmRSS).
    public func residentMB() -> Double { Self.residentMB(of: pid) }

    /// Resident memory of process `pid` now, in MB; 0 when it cannot be read.
    public static func residentMB(of pid: pid_t) -> Double {
        guard let status = try? String(contentsOfFile: "/proc/\(pid)/status", encoding: .utf8) else { return 0 }
        for line in status.split(separator: "\n") where line.hasPrefix("VmRSS:") {
            let kb = line.split(separator: " ").compactMap { Double($0) }.first ?? 0
            return kb / 1024
        }
        return 0
    }

    public func waitWithUsage() -> (cpu: Double, maxRSSMB: Double) {
        var status: Int32 = 0
        var usage = rusage()
        _ = wait4(pid, &status, 0, &usage)
        let cpu = Double(usage.ru_utime.tv_sec) + Double(usage.ru_utime.tv_usec) / 1e6
            + Double(usage.ru_stime.tv_sec) + Double(usage.ru_stime.tv_usec) / 1e6
        return (cpu, Double(usage.ru_maxrss) / 1024)
    }

    public func send(signal number: Int32) { kill(pid, number) }

    /// Waits for it to end by itself (after its input ended, say); its exit status, as
    /// `exitStatus(fromWaitStatus:)`. Reaps it.
    @discardableResult
    public func waitForExit() -> Int32 {
        if let exitStatus { return exitStatus }
        let status = StenoSystem.waitForExit(pid)
        exitStatus = status
        if let fd = stdoutFD { close(fd) }
        return status
    }

    /// The exit status once the process has ended (nil while it runs); reaps it.
    public func pollExit() -> Int32? {
        if let exitStatus { return exitStatus }
        var status: Int32 = 0
        guard waitpid(pid, &status, WNOHANG) == pid else { return nil }
        exitStatus = StenoSystem.exitStatus(fromWaitStatus: status)
        if let fd = stdoutFD { close(fd) }
        return exitStatus
    }
    private var exitStatus: Int32?

    /// Stops it (SIGTERM lets `steno serve` drain; SIGKILL when the bench does not need that);
    /// nothing to do once it has been reaped (by `pollExit` or an earlier `terminate`).
    public func terminate(_ signal: Int32 = SIGTERM) {
        if exitStatus != nil { return }
        kill(pid, signal)
        exitStatus = StenoSystem.waitForExit(pid)
        if let fd = stdoutFD { close(fd) }
    }
}
