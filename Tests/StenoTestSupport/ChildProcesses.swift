import Foundation

// What every test that starts a program needs, once.

/// A socket listening on 127.0.0.1 at a port the kernel chose, and that port.
public func loopbackListener(backlog: Int32 = 16) throws -> (fd: Int32, port: Int) {
    let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
    guard fd >= 0 else { throw TestClientError.io("socket", errno) }
    var one: Int32 = 1
    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, socklen_t(MemoryLayout<Int32>.size))
    var address = sockaddr_in()
    address.sin_family = sa_family_t(AF_INET)
    address.sin_addr.s_addr = inet_addr("127.0.0.1")
    address.sin_port = 0
    var length = socklen_t(MemoryLayout<sockaddr_in>.size)
    let ok = withUnsafeMutablePointer(to: &address) {
        $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
            bind(fd, $0, length) == 0 && listen(fd, backlog) == 0 && getsockname(fd, $0, &length) == 0
        }
    }
    guard ok else {
        let error = errno
        close(fd)
        throw TestClientError.io("bind/listen", error)
    }
    return (fd, Int(UInt16(bigEndian: address.sin_port)))
}

/// A port nobody listens on now (listened on and closed again): for a program that cannot
/// be told to pick one itself and say which.
public func freeLoopbackPort() throws -> Int {
    let (fd, port) = try loopbackListener(backlog: 1)
    close(fd)
    return port
}

/// Spawn attributes for a child that starts with no signal blocked and every handler at its
/// default: the test runner's threads block some signals (SIGTERM among them) and ignore
/// SIGPIPE, and a child that inherited that would never stop when told to.
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

/// Where one of a child's standard streams goes.
public enum ChildStream: Sendable {
    /// /dev/null.
    case null
    /// A pipe; this process keeps the other end (close-on-exec, so no other child inherits it).
    case pipe
    /// A file, created if missing, appended to or truncated.
    case file(String, append: Bool)
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
}

/// Starts `path ARGUMENTS`: the one place the tests and the benchmarks start a program.
/// Every child starts with clean signals (`withCleanSignals`) and with no other file of this
/// process open: tests run in parallel, and a child holding another test's pipe would keep
/// that pipe from ending. `environment` is added to this process's.
public func spawnChild(_ path: String, _ arguments: [String], stdin: ChildStream = .null, stdout: ChildStream = .null,
                       stderr: ChildStream = .null, environment: [String: String] = [:]) throws -> SpawnedChild {
    let streams = [stdin, stdout, stderr]
    // [child's end, this process's end] of each piped stream.
    var pipes: [[Int32]?] = [nil, nil, nil]
    func closeAll(_ which: (([Int32]) -> [Int32])) {
        for case let ends? in pipes { which(ends).forEach { _ = close($0) } }
    }
    for (fd, stream) in streams.enumerated() {
        guard case .pipe = stream else { continue }
        var ends: [Int32] = [-1, -1]
        guard pipe2(&ends, O_CLOEXEC) == 0 else {
            let error = errno
            closeAll { $0 }
            throw TestClientError.io("pipe2", error)
        }
        // ends[0] reads, ends[1] writes: the child reads its standard input.
        pipes[fd] = fd == 0 ? [ends[0], ends[1]] : [ends[1], ends[0]]
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
        }
    }
    // Files opened elsewhere without close-on-exec (by lws, by Foundation) stay out too.
    _ = closeFrom?(&actions, 3)

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
        throw TestClientError.io("posix_spawn \(path)", rc)
    }
    return SpawnedChild(pid: pid, stdin: pipes[0]?[1], stdout: pipes[1]?[1], stderr: pipes[2]?[1])
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

// GNU extensions Swift's Glibc module does not show (it is not built with _GNU_SOURCE).
private typealias Pipe2 = @convention(c) (UnsafeMutablePointer<Int32>, Int32) -> Int32
private typealias CloseFrom = @convention(c) (UnsafeMutablePointer<posix_spawn_file_actions_t>, Int32) -> Int32
private let pipe2: Pipe2 = unsafeBitCast(dlsym(UnsafeMutableRawPointer(bitPattern: 0), "pipe2")!, to: Pipe2.self)
/// glibc 2.34 and later (Debian 12 has 2.36).
private let closeFrom: CloseFrom? = dlsym(UnsafeMutableRawPointer(bitPattern: 0), "posix_spawn_file_actions_addclosefrom_np")
    .map { unsafeBitCast($0, to: CloseFrom.self) }
