import Foundation
import StenoSystem

#if canImport(Glibc)
import Glibc
#endif

/// Errors of the test clients. Every read and write has a deadline, so a test
/// fails with `.timeout` instead of hanging.
public enum TestClientError: Error, CustomStringConvertible, Equatable {
    case timeout(String)
    case closed(String)
    case io(String, Int32)
    case protocolError(String)
    case refused(TestHTTPResponse)

    public var description: String {
        switch self {
        case .timeout(let what): "timed out: \(what)"
        case .closed(let what): "connection closed: \(what)"
        case .io(let what, let e): "\(what) failed: \(String(decoding: UnsafeRawBufferPointer(start: strerror(e), count: strlen(strerror(e))), as: UTF8.self)) (\(e))"
        case .protocolError(let what): "protocol error: \(what)"
        case .refused(let r): "handshake refused with HTTP \(r.status)"
        }
    }
}

/// A byte stream to the server over a plain TCP socket, or over TLS through an
/// `openssl s_client` child process (its stdin/stdout), with deadlines on every
/// operation. Writes that time out keep their unsent bytes, which go out first on
/// the next write or `flush`, so a stream is never left with half a frame.
public final class TestStream {
    public let readFD: Int32
    public let writeFD: Int32
    private let child: pid_t?
    private var inbox: [UInt8] = []
    private var inboxStart = 0
    private(set) var unsent: [UInt8] = []
    private(set) var isClosed = false

    private init(readFD: Int32, writeFD: Int32, child: pid_t?) {
        self.readFD = readFD
        self.writeFD = writeFD
        self.child = child
        TestStream.ignoreSIGPIPE
    }

    deinit { close() }

    /// Writing to a socket or pipe the peer closed must fail with EPIPE, not kill
    /// the test process.
    private static let ignoreSIGPIPE: Void = { signal(SIGPIPE, SIG_IGN) }()

    /// A TCP connection to `host:port`. `receiveBufferSize`/`sendBufferSize` set
    /// SO_RCVBUF/SO_SNDBUF before connecting (small values make a slow reader).
    /// Binds or connects `fd` (`call`) to the IPv4 address `text`, `port`; on failure closes it
    /// and throws, naming `what`.
    private static func attach(_ fd: Int32, to text: String, port: Int, _ what: String,
                               _ call: (Int32, UnsafePointer<sockaddr>, socklen_t) -> Int32) throws {
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = in_port_t(UInt16(port).bigEndian)
        guard inet_pton(AF_INET, text, &address.sin_addr) == 1 else {
            Glibc.close(fd)
            throw TestClientError.protocolError("not an IPv4 address: \(text)")
        }
        let result = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { call(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
        }
        guard result == 0 else {
            let e = errno
            Glibc.close(fd)
            throw TestClientError.io(what, e)
        }
    }

    /// `source`: the local address to connect from (any of 127.0.0.0/8 on loopback), so that a
    /// test can be several clients.
    public static func tcp(host: String = "127.0.0.1", port: Int, source: String? = nil,
                           receiveBufferSize: Int? = nil, sendBufferSize: Int? = nil) throws -> TestStream {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        guard fd >= 0 else { throw TestClientError.io("socket", errno) }
        if let source {
            try attach(fd, to: source, port: 0, "bind to \(source)") { Glibc.bind($0, $1, $2) }
        }
        if var size = receiveBufferSize.map(Int32.init) {
            setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &size, socklen_t(MemoryLayout<Int32>.size))
        }
        if var size = sendBufferSize.map(Int32.init) {
            setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &size, socklen_t(MemoryLayout<Int32>.size))
        }
        var one: Int32 = 1
        setsockopt(fd, Int32(IPPROTO_TCP), TCP_NODELAY, &one, socklen_t(MemoryLayout<Int32>.size))
        try attach(fd, to: host, port: port, "connect to \(host):\(port)") { Glibc.connect($0, $1, $2) }
        _ = fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK)
        return TestStream(readFD: fd, writeFD: fd, child: nil)
    }

    /// A TLS connection to `127.0.0.1:port` made by `openssl s_client` (certificate
    /// not verified: tests use a self-signed one). Spawned with posix_spawn rather
    /// than Foundation's `Process`, whose `waitUntilExit` after `terminate` was seen
    /// to hang for minutes here.
    public static func tls(port: Int, openssl: String = "/usr/bin/openssl") throws -> TestStream {
        let child = try spawnChild(openssl, ["s_client", "-connect", "127.0.0.1:\(port)", "-quiet", "-nocommands",
                                              "-servername", "localhost"], stdin: .pipe, stdout: .pipe)
        let pid = child.pid
        let rd = child.stdout!, wd = child.stdin!
        _ = fcntl(rd, F_SETFL, fcntl(rd, F_GETFL) | O_NONBLOCK)
        _ = fcntl(wd, F_SETFL, fcntl(wd, F_GETFL) | O_NONBLOCK)
        return TestStream(readFD: rd, writeFD: wd, child: pid)
    }

    // MARK: writing

    /// Writes `bytes` (after any unsent bytes). Throws `.timeout` if the peer does not
    /// take them in time; what was not written stays queued.
    public func write(_ bytes: [UInt8], timeout: Double = 5) throws {
        unsent.append(contentsOf: bytes)
        try flush(timeout: timeout)
    }

    /// Writes the unsent bytes.
    public func flush(timeout: Double = 5) throws {
        let deadline = Deadline(timeout)
        var sent = 0
        defer { unsent.removeFirst(sent) }
        while sent < unsent.count {
            let n = unsent.withUnsafeBytes { buf in
                Glibc.write(writeFD, buf.baseAddress! + sent, buf.count - sent)
            }
            if n > 0 { sent += n; continue }
            let e = errno
            if n < 0 && (e == EAGAIN || e == EWOULDBLOCK) {
                guard try wait(fd: writeFD, events: Int16(POLLOUT), deadline: deadline) else {
                    throw TestClientError.timeout("writing \(unsent.count - sent) bytes")
                }
                continue
            }
            if n < 0 && e == EINTR { continue }
            throw TestClientError.io("write", e)
        }
    }

    /// Half-closes (TCP) or closes the input of s_client: the server sees EOF.
    public func shutdownWrite() {
        if child == nil { Glibc.shutdown(writeFD, Int32(SHUT_WR)) } else { Glibc.close(writeFD) }
    }

    // MARK: reading

    /// Reads what is available (waiting until something is, or the deadline).
    /// Returns false at end of stream.
    @discardableResult
    public func fill(deadline: Deadline) throws -> Bool {
        var chunk = [UInt8](repeating: 0, count: 65536)
        while true {
            let n = chunk.withUnsafeMutableBytes { Glibc.read(readFD, $0.baseAddress!, $0.count) }
            if n > 0 {
                inbox.append(contentsOf: chunk[0..<n])
                return true
            }
            if n == 0 { return false }
            let e = errno
            if e == EINTR { continue }
            if e == EAGAIN || e == EWOULDBLOCK {
                guard try wait(fd: readFD, events: Int16(POLLIN), deadline: deadline) else {
                    throw TestClientError.timeout("reading")
                }
                continue
            }
            if e == ECONNRESET { return false }
            throw TestClientError.io("read", e)
        }
    }

    public var buffered: Int { inbox.count - inboxStart }

    /// Exactly `count` bytes.
    public func read(exactly count: Int, deadline: Deadline) throws -> [UInt8] {
        while buffered < count {
            guard try fill(deadline: deadline) else { throw TestClientError.closed("after \(buffered) of \(count) bytes") }
        }
        let out = Array(inbox[inboxStart..<(inboxStart + count)])
        inboxStart += count
        compact()
        return out
    }

    /// Bytes up to and including `delimiter`.
    public func read(through delimiter: [UInt8], deadline: Deadline, limit: Int = 1 << 20) throws -> [UInt8] {
        var searchFrom = inboxStart
        while true {
            if let end = find(delimiter, from: searchFrom) {
                let out = Array(inbox[inboxStart..<end])
                inboxStart = end
                compact()
                return out
            }
            searchFrom = max(inboxStart, inbox.count - delimiter.count + 1)
            guard buffered < limit else { throw TestClientError.protocolError("no delimiter within \(limit) bytes") }
            guard try fill(deadline: deadline) else { throw TestClientError.closed("before the delimiter") }
        }
    }

    /// Everything until the peer closes.
    public func readToEnd(deadline: Deadline) throws -> [UInt8] {
        while try fill(deadline: deadline) {}
        let out = Array(inbox[inboxStart...])
        inboxStart = inbox.count
        compact()
        return out
    }

    /// Waits until the peer closes, discarding data. Returns the bytes discarded.
    public func awaitEOF(deadline: Deadline) throws -> Int {
        var total = 0
        while try fill(deadline: deadline) {
            total += buffered
            inbox.removeAll(keepingCapacity: true)
            inboxStart = 0
        }
        return total
    }

    private func find(_ needle: [UInt8], from: Int) -> Int? {
        guard needle.count > 0, inbox.count - from >= needle.count else { return nil }
        var i = from
        while i + needle.count <= inbox.count {
            if inbox[i] == needle[0] && Array(inbox[i..<(i + needle.count)]) == needle { return i + needle.count }
            i += 1
        }
        return nil
    }

    /// Drops consumed bytes (only between reads: searches hold indices).
    private func compact() {
        if inboxStart == inbox.count {
            inbox.removeAll(keepingCapacity: true)
            inboxStart = 0
        } else if inboxStart > 65536 && inboxStart * 2 > inbox.count {
            inbox.removeFirst(inboxStart)
            inboxStart = 0
        }
    }

    private func wait(fd: Int32, events: Int16, deadline: Deadline) throws -> Bool {
        while true {
            let ms = deadline.remainingMilliseconds
            if ms <= 0 { return false }
            var p = pollfd(fd: fd, events: events, revents: 0)
            let rc = poll(&p, 1, Int32(min(ms, 1000)))
            if rc > 0 { return true }
            if rc < 0 && errno != EINTR { throw TestClientError.io("poll", errno) }
        }
    }

    public func close() {
        if isClosed { return }
        isClosed = true
        Glibc.close(readFD)
        if writeFD != readFD { Glibc.close(writeFD) }
        if let pid = child {
            kill(pid, SIGKILL)
            var status: Int32 = 0
            while waitpid(pid, &status, 0) < 0 && errno == EINTR {}
        }
    }
}

/// A point in time to give up at.
public struct Deadline {
    public let end: ContinuousClock.Instant

    public init(_ seconds: Double) {
        end = .now + .milliseconds(Int(seconds * 1000))
    }

    public var remainingMilliseconds: Int {
        let d = end - .now
        let ms = d.components.seconds * 1000 + d.components.attoseconds / 1_000_000_000_000_000
        return Int(ms)
    }

    public var hasPassed: Bool { ContinuousClock.now >= end }
}

/// Runs a program to completion, its standard streams on /dev/null; returns its exit status
/// (`exitStatus(fromWaitStatus:)`).
public func runProgram(_ path: String, _ arguments: [String]) throws -> Int32 {
    waitForExit(try spawnChild(path, arguments).pid)
}

/// Runs a program to completion, its standard input /dev/null; returns its exit status and what
/// it wrote to standard output and to standard error (the second through a file, so that
/// neither pipe can fill while the other is read).
public func programOutput(_ path: String, _ arguments: [String]) throws -> (status: Int32, stdout: String, stderr: String) {
    let process = Process()
    process.executableURL = URL(fileURLWithPath: path)
    process.arguments = arguments
    let out = Pipe()
    let errors = FileManager.default.temporaryDirectory.appendingPathComponent("steno-stderr-\(UUID().uuidString)")
    _ = FileManager.default.createFile(atPath: errors.path, contents: nil)
    defer { try? FileManager.default.removeItem(at: errors) }
    let errorHandle = try FileHandle(forWritingTo: errors)
    process.standardInput = FileHandle.nullDevice
    process.standardOutput = out
    process.standardError = errorHandle
    try process.run()
    let text = out.fileHandleForReading.readDataToEndOfFile()
    process.waitUntilExit()
    try errorHandle.close()
    return (process.terminationStatus, String(decoding: text, as: UTF8.self), (try? String(contentsOf: errors, encoding: .utf8)) ?? "")
}
