import Foundation

#if canImport(Glibc)
import Glibc
#endif

// Starting another program: the one place Steno, its tests and its benchmarks do it.
//
// Not Foundation's `Process`: on Linux its child keeps the signal dispositions of this process,
// and `steno serve` ignores SIGTERM and SIGINT (it takes them from a dispatch source), so a
// child it started would ignore `Process.terminate()` too (measured: SigIgn 0x180004000 in the
// child of a process that ignored SIGTERM, still running 3 s after `terminate()`). And a test
// runner's threads block some signals, which a child would inherit as well.

/// Where one of a child's standard streams goes.
public enum ChildStream: Sendable {
    /// /dev/null.
    case null
    /// A pipe; this process keeps the other end (close-on-exec, so no other child inherits it).
    case pipe
    /// A file, created if missing, appended to or truncated.
    case file(String, append: Bool)
    /// This process's own, shared (opening /dev/stderr instead fails where it is a socket, as
    /// under systemd's journal).
    case inherit
}

/// Which way a pipe beyond the standard streams goes (`spawnChild`'s `extraPipes`).
public enum PipeDirection: Sendable {
    /// The child reads it; this process keeps the write end.
    case toChild
    /// The child writes it; this process keeps the read end.
    case fromChild
}

/// A program just started: its pid, and this process's ends of the pipes asked for (which
/// the caller owns and closes).
public struct SpawnedChild: Sendable {
    public let pid: pid_t
    /// The write end of its standard input, with `stdin: .pipe`.
    public let stdin: Int32?
    /// The read ends of its standard output and error, with `.pipe`.
    public let stdout: Int32?
    public let stderr: Int32?
    /// This process's ends of the extra pipes, in order: the child has them as descriptors 3, 4, ….
    public var extra: [Int32] = []
}

/// Why a program could not be started.
public struct SpawnError: Error, CustomStringConvertible {
    public let call: String
    public let code: Int32
    public var description: String { "\(call): \(String(cString: strerror(code)))" }
}

/// Spawn attributes for a child that starts with no signal blocked and every handler at its
/// default, whatever this process and the calling thread block or ignore.
public func withCleanSignals<T>(_ body: (UnsafePointer<posix_spawnattr_t>) throws -> T) rethrows -> T {
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
    return try body(&attributes)
}

/// Starts `path ARGUMENTS`. Every child starts with clean signals (`withCleanSignals`) and
/// with no other file of this process open: a child holding another's pipe would keep that
/// pipe from ending (tests run in parallel; the server holds sockets). `environment` is added
/// to this process's. `extraPipes` become the child's descriptors 3, 4, … (a channel of their
/// own beside its standard streams).
public func spawnChild(_ path: String, _ arguments: [String], stdin: ChildStream = .null, stdout: ChildStream = .null,
                       stderr: ChildStream = .null, extraPipes: [PipeDirection] = [],
                       environment: [String: String] = [:]) throws -> SpawnedChild {
    let streams = [stdin, stdout, stderr]
    // [child's end, this process's end] of each piped stream, then of each extra pipe.
    var pipes: [[Int32]?] = [nil, nil, nil] + extraPipes.map { _ in nil }
    func closeAll(_ which: (([Int32]) -> [Int32])) {
        for case let ends? in pipes { which(ends).forEach { _ = close($0) } }
    }
    for fd in pipes.indices {
        let childReads: Bool
        if fd < 3 {
            guard case .pipe = streams[fd] else { continue }
            childReads = fd == 0
        } else {
            childReads = extraPipes[fd - 3] == .toChild
        }
        var ends: [Int32] = [-1, -1]
        guard pipe2(&ends, O_CLOEXEC) == 0 else {
            let error = errno
            closeAll { $0 }
            throw SpawnError(call: "pipe2", code: error)
        }
        // Above the child's numbers 0…(2 + extras), so that no dup2 into one of them lands on
        // the source of another.
        for i in 0..<2 {
            let high = fcntl(ends[i], F_DUPFD_CLOEXEC, Int32(10 + extraPipes.count))
            if high >= 0 {
                close(ends[i])
                ends[i] = high
            }
        }
        // ends[0] reads, ends[1] writes.
        pipes[fd] = childReads ? [ends[0], ends[1]] : [ends[1], ends[0]]
    }

    var actions = posix_spawn_file_actions_t()
    posix_spawn_file_actions_init(&actions)
    defer { posix_spawn_file_actions_destroy(&actions) }
    for (fd, stream) in streams.enumerated() {
        let target = Int32(fd)
        switch stream {
        case .null:
            posix_spawn_file_actions_addopen(&actions, target, "/dev/null", fd == 0 ? O_RDONLY : O_WRONLY, 0)
        case .pipe:
            // dup2 clears close-on-exec on the copy, which is the child's own.
            posix_spawn_file_actions_adddup2(&actions, pipes[fd]![0], target)
        case .file(let file, let append):
            posix_spawn_file_actions_addopen(&actions, target, file, O_WRONLY | O_CREAT | (append ? O_APPEND : O_TRUNC), 0o644)
        case .inherit:
            break
        }
    }
    for fd in 3..<(3 + extraPipes.count) {
        posix_spawn_file_actions_adddup2(&actions, pipes[fd]![0], Int32(fd))
    }
    // Files opened elsewhere without close-on-exec (by lws, by Foundation) stay out too.
    _ = closeFrom?(&actions, Int32(3 + extraPipes.count))

    let variables = environment.isEmpty ? nil
        : ProcessInfo.processInfo.environment.merging(environment) { $1 }.map { "\($0.key)=\($0.value)" }
    var argv: [UnsafeMutablePointer<CChar>?] = ([path] + arguments).map { strdup($0) } + [nil]
    var envp: [UnsafeMutablePointer<CChar>?]? = variables.map { $0.map { strdup($0) } + [nil] }
    defer {
        argv.forEach { free($0) }
        envp?.forEach { free($0) }
    }
    var pid: pid_t = 0
    let rc = withCleanSignals { attributes in
        if envp != nil {
            return posix_spawn(&pid, path, &actions, attributes, &argv, &envp!)
        }
        return posix_spawn(&pid, path, &actions, attributes, &argv, environ)
    }
    closeAll { [$0[0]] }
    guard rc == 0 else {
        closeAll { [$0[1]] }
        throw SpawnError(call: "posix_spawn \(path)", code: rc)
    }
    return SpawnedChild(pid: pid, stdin: pipes[0]?[1], stdout: pipes[1]?[1], stderr: pipes[2]?[1],
                        extra: pipes[3...].map { $0![1] })
}

/// A child's exit status from what `waitpid` reported: its code, or 128 + the signal that
/// ended it, as a shell says it (WIFEXITED and WEXITSTATUS are macros Swift does not import).
public func exitStatus(fromWaitStatus raw: Int32) -> Int32 {
    (raw & 0x7f) == 0 ? (raw >> 8) & 0xff : 128 + (raw & 0x7f)
}

/// Waits for `pid` to end (through EINTR); its exit status as `exitStatus(fromWaitStatus:)`.
@discardableResult
public func waitForExit(_ pid: pid_t) -> Int32 {
    var raw: Int32 = 0
    while waitpid(pid, &raw, 0) < 0 && errno == EINTR {}
    return exitStatus(fromWaitStatus: raw)
}

/// What a program that ran to its end wrote, and how it ended.
public struct ChildOutput: Sendable {
    /// As `exitStatus(fromWaitStatus:)`: 128 + 9 when it was killed for taking too long.
    public var status: Int32
    public var stdout: String
    /// Empty unless asked for.
    public var stderr: String
    /// It was still running at the deadline, and was killed.
    public var timedOut: Bool
}

/// Runs `path ARGUMENTS` to its end with empty standard input, reading its standard output
/// (and its standard error, with `stderr`; else that goes nowhere) as it writes, so that a
/// full pipe never stalls it. One still running after `timeout` seconds is killed (SIGKILL:
/// it may ignore anything less), and what it wrote so far is returned.
public func runChild(_ path: String, _ arguments: [String], stderr captureErrors: Bool = false,
                     timeout: Double = .infinity) throws -> ChildOutput {
    let child = try spawnChild(path, arguments, stdout: .pipe, stderr: captureErrors ? .pipe : .null)
    let deadline = timeout.isFinite ? SystemClock.now() + timeout : .infinity
    var open = [child.stdout, child.stderr].compactMap { $0 }
    var collected: [Int32: [UInt8]] = [:]
    var timedOut = false
    var buffer = [UInt8](repeating: 0, count: 16 * 1024)
    while !open.isEmpty {
        var fds = open.map { pollfd(fd: $0, events: Int16(POLLIN), revents: 0) }
        let wait = deadline.isFinite ? Int32(max(0, min(1000, (deadline - SystemClock.now()) * 1000))) : -1
        let ready = poll(&fds, nfds_t(fds.count), wait)
        if ready < 0 && errno != EINTR { break }
        if ready <= 0 {
            if SystemClock.now() >= deadline {
                timedOut = true
                kill(child.pid, SIGKILL)
                break
            }
            continue
        }
        for entry in fds where entry.revents != 0 {
            let n = buffer.withUnsafeMutableBytes { read(entry.fd, $0.baseAddress, $0.count) }
            if n > 0 {
                collected[entry.fd, default: []] += buffer[0..<n]
            } else if !(n < 0 && errno == EINTR) {
                open.removeAll { $0 == entry.fd }
            }
        }
    }
    [child.stdout, child.stderr].compactMap { $0 }.forEach { _ = close($0) }
    let status = waitForExit(child.pid)
    func text(_ fd: Int32?) -> String { fd.map { String(decoding: collected[$0] ?? [], as: UTF8.self) } ?? "" }
    return ChildOutput(status: status, stdout: text(child.stdout), stderr: text(child.stderr), timedOut: timedOut)
}

// GNU extensions Swift's Glibc module does not show (it is not built with _GNU_SOURCE).
private typealias Pipe2 = @convention(c) (UnsafeMutablePointer<Int32>, Int32) -> Int32
private typealias CloseFrom = @convention(c) (UnsafeMutablePointer<posix_spawn_file_actions_t>, Int32) -> Int32
private let pipe2: Pipe2 = unsafeBitCast(dlsym(UnsafeMutableRawPointer(bitPattern: 0), "pipe2")!, to: Pipe2.self)
/// glibc 2.34 and later (Debian 12 has 2.36).
private let closeFrom: CloseFrom? = dlsym(UnsafeMutableRawPointer(bitPattern: 0), "posix_spawn_file_actions_addclosefrom_np")
    .map { unsafeBitCast($0, to: CloseFrom.self) }
