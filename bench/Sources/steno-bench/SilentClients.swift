// steno-bench connections: the silent sessions, one thread with epoll over raw sockets (ConnectionsBench.swift).
import CEpoll
import Foundation
import StenoAudio
import StenoCore
import StenoSpeech
import StenoSystem
import StenoTestSupport

#if canImport(Glibc)
import Glibc
#endif
// MARK: - The client

/// N WebSocket connections on one thread: non-blocking sockets, level-triggered epoll.
final class SilentClients {
    enum Phase { case connecting, upgrading, starting, silent, closed }

    final class Connection {
        let fd: Int32
        var phase = Phase.connecting
        var input: [UInt8] = []
        var sawClose = false
        init(fd: Int32) { self.fd = fd }
    }

    let port: Int
    /// Connections to open (`add` raises it).
    private(set) var count: Int
    let inFlight: Int
    let epoll: Int32
    var connections: [Int32: Connection] = [:]
    var opened = 0
    var handshaking = 0
    private(set) var upgradedCount = 0
    private(set) var readyCount = 0
    private(set) var failedCount = 0
    private(set) var cutCount = 0
    private(set) var pingCount = 0
    private(set) var closeCodes: [UInt16: Int] = [:]
    private(set) var failures: [String] = []
    private(set) var lastUpgradeAt = 0.0
    private(set) var lastReadyAt = 0.0
    private(set) var firstCloseAt = 0.0
    private(set) var lastCloseAt = 0.0
    /// When each 1,000th upgrade came.
    private(set) var thousands: [Double] = []
    var ready: Bool { epoll >= 0 }
    /// Connections not yet closed (closed ones leave the table).
    var openCount: Int { connections.count }

    private let request: [UInt8]
    private let startFrame: [UInt8]
    /// Sessions that answered ready, in order (for the sparse messages and `cancelOne`).
    private var silentFDs: [Int32] = []
    private var sparseEvery = 0.0
    private var sparseStart = 0.0
    private var sparseSent = 0
    private var sparseFrame: [UInt8] = []
    /// The connection `cancelOne` ended: its close (1000) is not counted with the others.
    private var cancelledFD: Int32 = -1

    init(port: Int, count: Int, inFlight: Int) {
        self.port = port
        self.count = count
        self.inFlight = inFlight
        epoll = epoll_create1(Int32(EPOLL_CLOEXEC))
        request = upgradeRequest(port: port)
        startFrame = maskedFrame(opcode: 1, Array(#"{"type":"start","audio":{"encoding":"pcm_s16le","sampleRate":16000,"channels":1}}"#.utf8))
    }

    deinit {
        closeAll()
        if epoll >= 0 { close(epoll) }
    }

    /// Opens `more` connections too, on the next `run`.
    func add(_ more: Int) { count += more }

    /// From now on each silent session sends a `silence` message of `seconds` every `seconds`
    /// (spread evenly over the interval).
    func startSparse(every seconds: Double, frame: [UInt8]? = nil) {
        sparseEvery = seconds
        sparseStart = monotonicSeconds()
        sparseSent = 0
        sparseFrame = frame ?? maskedFrame(opcode: 1, Array(#"{"type":"silence","duration":\#(seconds)}"#.utf8))
    }

    /// Ends the last session that became ready with `cancel` (the server closes it, 1000).
    func cancelOne() {
        guard let fd = silentFDs.last, let c = connections[fd] else { return }
        cancelledFD = fd
        _ = send(c, maskedFrame(opcode: 1, Array(#"{"type":"cancel"}"#.utf8)))
    }

    func closeAll() {
        for c in connections.values { close(c.fd) }
        connections.removeAll()
    }

    /// Services the connections until `done()` holds or `deadline` passes, opening new ones
    /// while fewer than `count` were opened and fewer than `inFlight` are mid-handshake.
    func run(until deadline: Double, _ done: () -> Bool) {
        var events = [epoll_event](repeating: epoll_event(), count: 1024)
        while !done() {
            while opened < count && handshaking < inFlight { openOne() }
            let now = monotonicSeconds()
            if now >= deadline { return }
            if sparseEvery > 0 { sendSparse(now) }
            let wait = Int32(min(sparseEvery > 0 ? 10 : 100, max(1, (deadline - now) * 1000)))
            let n = epoll_wait(epoll, &events, Int32(events.count), wait)
            if n < 0 { if errno == EINTR { continue }; return }
            for i in 0..<Int(n) {
                let fd = events[i].data.fd
                guard let c = connections[fd] else { continue }
                service(c, events[i].events)
            }
        }
    }

    private func sendSparse(_ now: Double) {
        guard !silentFDs.isEmpty else { return }
        let due = Int((now - sparseStart) / sparseEvery * Double(silentFDs.count)) - sparseSent
        for _ in 0..<max(0, min(due, silentFDs.count)) {
            let fd = silentFDs[sparseSent % silentFDs.count]
            sparseSent += 1
            if fd != cancelledFD, let c = connections[fd], c.phase == .silent { _ = send(c, sparseFrame) }
        }
    }

    private func openOne() {
        opened += 1
        let fd: Int32
        switch connectNonBlocking(port: port) {
        case .success(let socket): fd = socket
        case .failure(let error): fail(error.description); return
        }
        let c = Connection(fd: fd)
        connections[fd] = c
        handshaking += 1
        watch(fd, EPOLL_CTL_ADD, EPOLLOUT.rawValue)
    }

    private func watch(_ fd: Int32, _ op: Int32, _ events: UInt32) {
        var event = epoll_event()
        event.events = events
        event.data.fd = fd
        epoll_ctl(epoll, op, fd, &event)
    }

    private func service(_ c: Connection, _ events: UInt32) {
        if c.phase == .connecting {
            let error = connectError(c.fd)
            if error != 0 { drop(c, failure: "connect: \(String(cString: strerror(error)))"); return }
            guard send(c, request) else { return }
            c.phase = .upgrading
            watch(c.fd, EPOLL_CTL_MOD, EPOLLIN.rawValue)
            return
        }
        var buffer = [UInt8](repeating: 0, count: 4096)
        let n = read(c.fd, &buffer, buffer.count)
        if n < 0 && (errno == EAGAIN || errno == EINTR) { return }
        if n <= 0 {
            if c.phase == .silent {
                if !c.sawClose { cutCount += 1 }
                finish(c)
            } else {
                drop(c, failure: "closed before ready (\(c.phase))")
            }
            return
        }
        c.input.append(contentsOf: buffer[0..<n])
        if c.phase == .upgrading {
            guard let end = httpHeadEnd(c.input) else { return }
            let head = String(decoding: c.input[0..<end], as: UTF8.self)
            c.input.removeFirst(end + 4)
            guard head.hasPrefix("HTTP/1.1 101") else {
                drop(c, failure: String(head.prefix(while: { $0 != "\r" })))
                return
            }
            upgradedCount += 1
            lastUpgradeAt = monotonicSeconds()
            if upgradedCount % 1000 == 0 { thousands.append(lastUpgradeAt) }
            c.phase = .starting
            guard send(c, startFrame) else { return }
        }
        readFrames(c)
    }

    private func readFrames(_ c: Connection) {
        while let frame = takeServerFrame(&c.input) {
            let payload = frame.payload
            switch frame.opcode {
            case 1:
                if c.phase == .starting, payload.starts(with: Array(#"{"type":"ready""#.utf8)) {
                    c.phase = .silent
                    handshaking -= 1
                    readyCount += 1
                    silentFDs.append(c.fd)
                    lastReadyAt = monotonicSeconds()
                }
            case 8:
                let code = payload.count >= 2 ? UInt16(payload[0]) << 8 | UInt16(payload[1]) : 1005
                if !c.sawClose {
                    c.sawClose = true
                    if c.fd != cancelledFD {
                        closeCodes[code, default: 0] += 1
                        if firstCloseAt == 0 { firstCloseAt = monotonicSeconds() }
                        lastCloseAt = monotonicSeconds()
                    }
                    _ = send(c, maskedFrame(opcode: 8, Array(payload.prefix(2))))
                }
            case 9:
                pingCount += 1
                _ = send(c, maskedFrame(opcode: 10, payload))
            default:
                break
            }
        }
    }

    /// Writes all of `bytes` (small: a handshake or a frame fits the socket buffer).
    private func send(_ c: Connection, _ bytes: [UInt8]) -> Bool {
        var offset = 0
        while offset < bytes.count {
            let n = bytes.withUnsafeBytes { write(c.fd, $0.baseAddress! + offset, bytes.count - offset) }
            if n < 0 && errno == EINTR { continue }
            if n <= 0 {
                if c.phase == .silent { cutCount += 1; finish(c) } else { drop(c, failure: "write failed") }
                return false
            }
            offset += n
        }
        return true
    }

    private func drop(_ c: Connection, failure: String) {
        fail(failure)
        finish(c)
    }

    private func fail(_ why: String) {
        failedCount += 1
        handshaking -= 1
        if failures.count < 20 { failures.append(why) }
    }

    private func finish(_ c: Connection) {
        guard c.phase != .closed else { return }
        c.phase = .closed
        epoll_ctl(epoll, EPOLL_CTL_DEL, c.fd, nil)
        close(c.fd)
        connections[c.fd] = nil
    }
}
