import Foundation
import Glibc

/// A child process: its pid, its stdout (if captured), its stdin (if fed), its CPU and memory
/// from /proc.
final class Child: @unchecked Sendable {
    let pid: pid_t
    let stdoutFD: Int32?
    /// The write end of its standard input, with `spawn(…, stdin: true)`; close it to end
    /// the input.
    let stdinFD: Int32?

    private init(pid: pid_t, stdoutFD: Int32?, stdinFD: Int32?) {
        self.pid = pid
        self.stdoutFD = stdoutFD
        self.stdinFD = stdinFD
    }

    /// Standard error goes to `stderrPath` (appended), or nowhere. Standard input is a pipe
    /// with `stdin` (``stdinFD``), else the bench's own.
    static func spawn(_ path: String, _ arguments: [String], stdout capture: Bool, stdin feed: Bool = false,
                      stderrPath: String? = nil) -> Child? {
        var fds: [Int32] = [-1, -1]
        var input: [Int32] = [-1, -1]
        if capture { guard pipe(&fds) == 0 else { return nil } }
        if feed { guard pipe(&input) == 0 else { return nil } }
        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        if capture {
            posix_spawn_file_actions_adddup2(&actions, fds[1], 1)
            posix_spawn_file_actions_addclose(&actions, fds[0])
        } else {
            posix_spawn_file_actions_addopen(&actions, 1, "/dev/null", O_WRONLY, 0)
        }
        if feed {
            posix_spawn_file_actions_adddup2(&actions, input[0], 0)
            posix_spawn_file_actions_addclose(&actions, input[1])
        }
        posix_spawn_file_actions_addopen(&actions, 2, stderrPath ?? "/dev/null", O_WRONLY | O_CREAT | O_APPEND, 0o644)
        // No signal blocked and default handlers in the child, whatever this process does
        // with its own: a child that inherited a blocked SIGTERM would never drain and stop.
        var attributes = posix_spawnattr_t()
        posix_spawnattr_init(&attributes)
        defer { posix_spawnattr_destroy(&attributes) }
        var none = sigset_t()
        sigemptyset(&none)
        posix_spawnattr_setsigmask(&attributes, &none)
        var all = sigset_t()
        sigfillset(&all)
        posix_spawnattr_setsigdefault(&attributes, &all)
        posix_spawnattr_setflags(&attributes, Int16(POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF))
        let argv: [UnsafeMutablePointer<CChar>?] = ([path] + arguments).map { strdup($0) } + [nil]
        defer { argv.forEach { free($0) } }
        var pid: pid_t = 0
        guard posix_spawn(&pid, path, &actions, &attributes, argv, environ) == 0 else { return nil }
        if capture { close(fds[1]) }
        if feed { close(input[0]) }
        return Child(pid: pid, stdoutFD: capture ? fds[0] : nil, stdinFD: feed ? input[1] : nil)
    }

    /// Reads stdout until the `listening on http://host:PORT` line.
    func readPort() -> Int? {
        guard let fd = stdoutFD else { return nil }
        var text = ""
        var byte: UInt8 = 0
        while read(fd, &byte, 1) == 1 {
            if byte == UInt8(ascii: "\n") {
                if let range = text.range(of: "listening on "), let colon = text[range.upperBound...].lastIndex(of: ":") {
                    return Int(text[text.index(after: colon)...].trimmingCharacters(in: .whitespaces))
                }
                text = ""
            } else {
                text.append(Character(UnicodeScalar(byte)))
            }
        }
        return nil
    }

    /// Everything it writes to stdout until it closes it.
    func readAllStdout() -> String {
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
    func cpuSeconds() -> Double {
        guard let stat = try? String(contentsOfFile: "/proc/\(pid)/stat", encoding: .utf8),
              let close = stat.lastIndex(of: ")") else { return 0 }
        let fields = stat[stat.index(after: close)...].split(separator: " ")
        // After the command: state is field 3 → utime is field 14, stime 15 (1-based in proc(5)).
        guard fields.count > 13, let user = Double(fields[11]), let system = Double(fields[12]) else { return 0 }
        return (user + system) / Double(sysconf(Int32(_SC_CLK_TCK)))
    }

    /// Resident memory now, in MB (/proc/PID/status VmRSS).
    func residentMB() -> Double {
        guard let status = try? String(contentsOfFile: "/proc/\(pid)/status", encoding: .utf8) else { return 0 }
        for line in status.split(separator: "\n") where line.hasPrefix("VmRSS:") {
            let kb = line.split(separator: " ").compactMap { Double($0) }.first ?? 0
            return kb / 1024
        }
        return 0
    }

    func waitWithUsage() -> (cpu: Double, maxRSSMB: Double) {
        var status: Int32 = 0
        var usage = rusage()
        _ = wait4(pid, &status, 0, &usage)
        let cpu = Double(usage.ru_utime.tv_sec) + Double(usage.ru_utime.tv_usec) / 1e6
            + Double(usage.ru_stime.tv_sec) + Double(usage.ru_stime.tv_usec) / 1e6
        return (cpu, Double(usage.ru_maxrss) / 1024)
    }

    func send(signal number: Int32) { kill(pid, number) }

    /// The exit status once the process has ended (nil while it runs); reaps it.
    func pollExit() -> Int32? {
        if let exitStatus { return exitStatus }
        var status: Int32 = 0
        guard waitpid(pid, &status, WNOHANG) == pid else { return nil }
        exitStatus = (status & 0x7f) == 0 ? (status >> 8) & 0xff : 128 + (status & 0x7f)
        if let fd = stdoutFD { close(fd) }
        return exitStatus
    }
    private var exitStatus: Int32?

    /// Stops it (SIGTERM lets `steno serve` drain; SIGKILL when the bench does not need that);
    /// nothing to do once `pollExit` has reaped it.
    func terminate(_ signal: Int32 = SIGTERM) {
        if exitStatus != nil { return }
        kill(pid, signal)
        var status: Int32 = 0
        waitpid(pid, &status, 0)
        if let fd = stdoutFD { close(fd) }
    }
}

/// Seconds on the monotonic clock.
func monotonicSeconds() -> Double {
    var ts = timespec()
    clock_gettime(CLOCK_MONOTONIC, &ts)
    return Double(ts.tv_sec) + Double(ts.tv_nsec) / 1e9
}

/// The load average (1, 5, 15 minutes) now, which every table quotes: these machines are shared.
func loadAverage() -> String {
    guard let text = try? String(contentsOfFile: "/proc/loadavg", encoding: .utf8) else { return "?" }
    return text.split(separator: " ").prefix(3).joined(separator: " ")
}
