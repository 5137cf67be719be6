import CEpoll
import Foundation
import StenoSystem

#if canImport(Glibc)
import Glibc
#endif

// steno-bench connections: many connected, silent sessions in one `steno serve` (a release
// build, its own process), for each event loop side by side: how fast the handshakes go, what
// the server's resident memory is before and with N sessions, and what the silent sessions
// cost in CPU while they sit there (from /proc/PID/stat over a fixed interval, against the
// same interval with no connection); then SIGTERM, and whether every session is closed with
// 1001 before the process exits.
//
//   steno-bench connections [--count 10000] [--loops libuv,poll] [--interval 20]
//                           [--keepalive 10] [--repeat 1] [--steno .build/release/steno]
//
// The client is this process: one thread, epoll over raw non-blocking sockets. Each connection
// upgrades to /v1/stream, sends `start` (16 kHz PCM), reads `ready`, and then sends nothing but
// the pongs the server's keepalive pings ask for. At most `--in-flight` handshakes are under way
// at once, so that the listen backlog never overflows into SYN retries (which would measure
// the kernel's 1 s retry timer, not the server).

func runConnectionsBench(_ arguments: [String]) {
    var count = 10_000
    var loops = ["libuv", "poll"]
    var interval = 20.0
    var keepalive = 10
    var repeats = 1
    var inFlight = 128
    var steno = ".build/release/steno"
    var index = 0
    while index < arguments.count {
        let value = index + 1 < arguments.count ? arguments[index + 1] : ""
        switch arguments[index] {
        case "--count": count = max(1, Int(value) ?? count); index += 1
        case "--loops": loops = value.split(separator: ",").map(String.init); index += 1
        case "--interval": interval = max(1, Double(value) ?? interval); index += 1
        case "--keepalive": keepalive = max(0, Int(value) ?? keepalive); index += 1
        case "--repeat": repeats = max(1, Int(value) ?? repeats); index += 1
        case "--in-flight": inFlight = max(1, Int(value) ?? inFlight); index += 1
        case "--steno": steno = value; index += 1
        default: print("connections benchmark: unknown argument \(arguments[index])"); return
        }
        index += 1
    }
    guard FileManager.default.isExecutableFile(atPath: steno) else {
        print("connections benchmark: no steno binary at \(steno) (swift build -c release --product steno)")
        return
    }
    // This process holds one socket per connection too.
    let limit = OpenFileLimit.raise()
    print("connections benchmark: \(count) silent sessions (start, 16 kHz PCM, then nothing), keepalive \(keepalive) s,")
    print("  CPU measured over \(format(interval, 0)) s; steno: \(steno); client open files: \(limit)")
    if limit.soft < UInt64(count + 64) {
        print("  the client cannot hold \(count) sockets with this limit: raise the hard limit (ulimit -Hn)")
        return
    }
    print("")

    var rows: [(String, ConnectionsRow)] = []
    for round in 0..<repeats {
        for loop in loops {
            guard let row = measureConnections(steno: steno, loop: loop, count: count, interval: interval,
                                               keepalive: keepalive, inFlight: inFlight) else {
                print("  \(loop) (round \(round + 1)): failed")
                continue
            }
            print("  \(loop) (round \(round + 1)): \(row.summary)")
            rows.append((loop, row))
        }
    }
    print("")
    print("  loop     sessions   handshakes/s   all ready   RSS before   RSS with N   KB/session   idle CPU ms/s   CPU ms/s per 1,000   closed 1001   cut   exit")
    for (loop, r) in rows {
        print("  " + [pad(loop, 6), pad("\(r.ready)/\(r.count)", 10), pad(format(r.handshakeRate, 0), 14),
                      pad(format(r.readyAfter, 2) + " s", 11), pad(format(r.rssBeforeMB, 1) + " MB", 12),
                      pad(format(r.rssWithMB, 1) + " MB", 12), pad(format(r.kbPerSession, 1), 12),
                      pad(format(r.idleCPUms, 2), 15), pad(format(r.cpuPerThousandMs, 2), 20),
                      pad("\(r.closed1001)", 13), pad("\(r.cut)", 5), pad(r.exitStatus.map(String.init) ?? "-", 6)]
            .joined(separator: " "))
    }
    print("")
    print("  handshakes/s: upgrades (101) per second from the first connect to the last 101; all ready: until")
    print("  every session answered start with ready. RSS: the server's VmRSS with no connection (once it has")
    print("  made its shared decoders and gone quiet) and with every session ready and settled 3 s; KB/session")
    print("  is the difference over N.")
    print("  idle CPU: the server's user+system time per second with no connection; per 1,000: with N silent")
    print("  sessions, minus idle, per second, per 1,000 sessions. closed 1001: sessions that got their close")
    print("  frame (1001) after SIGTERM; cut: connections that ended without one; exit: the server's status.")
}

struct ConnectionsRow {
    var count = 0
    var ready = 0
    var handshakeRate = 0.0
    var readyAfter = 0.0
    var rssBeforeMB = 0.0
    var rssWithMB = 0.0
    var idleCPUms = 0.0
    var loadedCPUms = 0.0
    var closed1001 = 0
    var cut = 0
    var otherCloses: [UInt16: Int] = [:]
    var pings = 0
    var drainSeconds = 0.0
    var exitStatus: Int32?
    var settleSeconds = 0.0
    var firstThousandRate = 0.0
    var firstClose = 0.0, lastClose = 0.0, exitAfter = 0.0
    var lastThousandRate = 0.0

    var kbPerSession: Double { ready == 0 ? 0 : (rssWithMB - rssBeforeMB) * 1024 / Double(ready) }
    var cpuPerThousandMs: Double { ready == 0 ? 0 : (loadedCPUms - idleCPUms) / (Double(ready) / 1000) }

    var summary: String {
        var text = "quiet after \(format(settleSeconds, 0)) s; \(ready)/\(count) ready, \(format(handshakeRate, 0)) handshakes/s "
            + "(first 1,000: \(format(firstThousandRate, 0))/s, last 1,000: \(format(lastThousandRate, 0))/s), "
            + "RSS \(format(rssBeforeMB, 1)) → \(format(rssWithMB, 1)) MB, "
            + "CPU \(format(idleCPUms, 2)) → \(format(loadedCPUms, 2)) ms/s, \(pings) pings answered, "
            + "drain \(format(drainSeconds, 1)) s (close frames from \(format(firstClose, 1)) to \(format(lastClose, 1)) s, "
            + "exit after \(format(exitAfter, 1)) s): \(closed1001) closed 1001, \(cut) cut"
        if !otherCloses.isEmpty {
            text += ", \(otherCloses.values.reduce(0, +)) other close codes (\(otherCloses.keys.sorted().prefix(5).map(String.init).joined(separator: ", "))…)"
        }
        return text
    }
}

private func measureConnections(steno: String, loop: String, count: Int, interval: Double, keepalive: Int,
                                inFlight: Int) -> ConnectionsRow? {
    let logPath = NSTemporaryDirectory() + "steno-bench-connections-\(getpid())-\(loop).log"
    unlink(logPath)
    guard let server = Child.spawn(steno, ["serve", "--port", "0", "--event-loop", loop,
                                           "--max-sessions", "\(count + 16)", "--idle-timeout", "0",
                                           "--keepalive", "\(keepalive)", "--drain-timeout", "30",
                                           "--log-level", "warning", "--web-root", "/nonexistent"],
                                   stdout: true, stderrPath: logPath),
          let port = server.readPort() else {
        print("  \(loop): the server did not start (log: \(logPath))")
        return nil
    }
    defer { server.terminate() }
    var row = ConnectionsRow()
    row.count = count

    // The server alone, once it has made its shared decoders in the background (≈0.5 s and
    // ≈95 MB each): its memory, and what it burns doing nothing.
    row.settleSeconds = waitUntilQuiet(server)
    row.rssBeforeMB = server.residentMB()
    let idleStart = (server.cpuSeconds(), monotonicSeconds())
    usleep(useconds_t(interval * 1_000_000))
    row.idleCPUms = (server.cpuSeconds() - idleStart.0) / (monotonicSeconds() - idleStart.1) * 1000

    let client = SilentClients(port: port, count: count, inFlight: inFlight)
    guard client.ready else { print("  \(loop): the client could not set up epoll"); return nil }
    let began = monotonicSeconds()
    client.run(until: began + 300) { client.readyCount + client.failedCount >= count }
    row.ready = client.readyCount
    row.handshakeRate = Double(client.upgradedCount) / max(1e-9, client.lastUpgradeAt - began)
    row.readyAfter = client.lastReadyAt - began
    // The first and the last thousand: whether a handshake costs more as connections pile up.
    if let first = client.thousands.first {
        row.firstThousandRate = 1000 / max(1e-9, first - began)
    }
    if client.thousands.count >= 2 {
        let n = client.thousands.count
        row.lastThousandRate = 1000 / max(1e-9, client.thousands[n - 1] - client.thousands[n - 2])
    }
    if client.failedCount > 0 {
        print("  \(loop): \(client.failedCount) connections failed: \(client.failures.prefix(5))")
    }

    // Settled: what N silent sessions hold, then what they cost over the interval.
    client.run(until: monotonicSeconds() + 3) { false }
    row.rssWithMB = server.residentMB()
    let loadedStart = (server.cpuSeconds(), monotonicSeconds())
    client.run(until: loadedStart.1 + interval) { false }
    row.loadedCPUms = (server.cpuSeconds() - loadedStart.0) / (monotonicSeconds() - loadedStart.1) * 1000

    // SIGTERM: every session should get `shutting_down` and close 1001, and the server exit 0.
    let signalled = monotonicSeconds()
    server.send(signal: SIGTERM)
    client.run(until: signalled + 90) { client.openCount == 0 }
    row.drainSeconds = monotonicSeconds() - signalled
    row.firstClose = client.firstCloseAt > 0 ? client.firstCloseAt - signalled : 0
    row.lastClose = client.lastCloseAt > 0 ? client.lastCloseAt - signalled : 0
    row.closed1001 = client.closeCodes[1001, default: 0]
    row.otherCloses = client.closeCodes.filter { $0.key != 1001 }
    row.cut = client.cutCount + client.openCount
    row.pings = client.pingCount
    let deadline = monotonicSeconds() + 30
    while server.pollExit() == nil && monotonicSeconds() < deadline { usleep(20_000) }
    row.exitStatus = server.pollExit()
    row.exitAfter = monotonicSeconds() - signalled
    client.closeAll()
    return row
}

/// Waits until the server uses less than 2 % of a core for two seconds in a row (at most 60 s);
/// returns how long that took.
private func waitUntilQuiet(_ server: Child) -> Double {
    let began = monotonicSeconds()
    var quiet = 0
    var last = server.cpuSeconds()
    while quiet < 2 && monotonicSeconds() - began < 60 {
        usleep(1_000_000)
        let now = server.cpuSeconds()
        quiet = now - last < 0.02 ? quiet + 1 : 0
        last = now
    }
    return monotonicSeconds() - began
}

// MARK: - The client

/// N WebSocket connections on one thread: non-blocking sockets, level-triggered epoll.
private final class SilentClients {
    enum Phase { case connecting, upgrading, starting, silent, closed }

    final class Connection {
        let fd: Int32
        var phase = Phase.connecting
        var input: [UInt8] = []
        var sawClose = false
        init(fd: Int32) { self.fd = fd }
    }

    let port: Int
    let count: Int
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

    init(port: Int, count: Int, inFlight: Int) {
        self.port = port
        self.count = count
        self.inFlight = inFlight
        epoll = epoll_create1(Int32(EPOLL_CLOEXEC))
        request = Array(("GET /v1/stream HTTP/1.1\r\nHost: 127.0.0.1:\(port)\r\nUpgrade: websocket\r\n"
            + "Connection: Upgrade\r\nSec-WebSocket-Key: c3Rlbm8tY29ubmVjdGlvbnM=\r\nSec-WebSocket-Version: 13\r\n\r\n").utf8)
        startFrame = Self.frame(opcode: 1, Array(#"{"type":"start","audio":{"encoding":"pcm_s16le","sampleRate":16000,"channels":1}}"#.utf8))
    }

    deinit {
        closeAll()
        if epoll >= 0 { close(epoll) }
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
            let wait = Int32(min(100, max(1, (deadline - now) * 1000)))
            let n = epoll_wait(epoll, &events, Int32(events.count), wait)
            if n < 0 { if errno == EINTR { continue }; return }
            for i in 0..<Int(n) {
                let fd = events[i].data.fd
                guard let c = connections[fd] else { continue }
                service(c, events[i].events)
            }
        }
    }

    private func openOne() {
        opened += 1
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_NONBLOCK.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        guard fd >= 0 else { fail("socket: \(String(cString: strerror(errno)))"); return }
        var one: Int32 = 1
        setsockopt(fd, Int32(IPPROTO_TCP), TCP_NODELAY, &one, socklen_t(MemoryLayout<Int32>.size))
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = in_port_t(UInt16(port).bigEndian)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        let r = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
        }
        if r != 0 && errno != EINPROGRESS {
            fail("connect: \(String(cString: strerror(errno)))")
            close(fd)
            return
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
            var error: Int32 = 0
            var length = socklen_t(MemoryLayout<Int32>.size)
            getsockopt(c.fd, SOL_SOCKET, SO_ERROR, &error, &length)
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
            guard let end = headEnd(c.input) else { return }
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
        while c.input.count >= 2 {
            let opcode = c.input[0] & 0x0f
            var length = Int(c.input[1] & 0x7f)
            var at = 2
            if length == 126 {
                guard c.input.count >= 4 else { return }
                length = Int(c.input[2]) << 8 | Int(c.input[3])
                at = 4
            } else if length == 127 {
                guard c.input.count >= 10 else { return }
                length = (2..<10).reduce(0) { $0 << 8 | Int(c.input[$1]) }
                at = 10
            }
            guard c.input.count >= at + length else { return }
            let payload = Array(c.input[at..<(at + length)])
            c.input.removeFirst(at + length)
            switch opcode {
            case 1:
                if c.phase == .starting, payload.starts(with: Array(#"{"type":"ready""#.utf8)) {
                    c.phase = .silent
                    handshaking -= 1
                    readyCount += 1
                    lastReadyAt = monotonicSeconds()
                }
            case 8:
                let code = payload.count >= 2 ? UInt16(payload[0]) << 8 | UInt16(payload[1]) : 1005
                if !c.sawClose {
                    c.sawClose = true
                    closeCodes[code, default: 0] += 1
                    if firstCloseAt == 0 { firstCloseAt = monotonicSeconds() }
                    lastCloseAt = monotonicSeconds()
                    _ = send(c, Self.frame(opcode: 8, Array(payload.prefix(2))))
                }
            case 9:
                pingCount += 1
                _ = send(c, Self.frame(opcode: 10, payload))
            default:
                break
            }
        }
    }

    private func headEnd(_ bytes: [UInt8]) -> Int? {
        guard bytes.count >= 4 else { return nil }
        for i in 0...(bytes.count - 4) where bytes[i] == 13 && bytes[i + 1] == 10 && bytes[i + 2] == 13 && bytes[i + 3] == 10 {
            return i
        }
        return nil
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

    /// A masked client frame (RFC 6455 §5.3); payloads here are under 64 KB.
    static func frame(opcode: UInt8, _ payload: [UInt8]) -> [UInt8] {
        let mask: [UInt8] = [0x5a, 0x17, 0xc3, 0x88]
        var out: [UInt8] = [0x80 | opcode]
        if payload.count < 126 {
            out.append(0x80 | UInt8(payload.count))
        } else {
            out.append(0x80 | 126)
            out.append(UInt8(payload.count >> 8))
            out.append(UInt8(payload.count & 0xff))
        }
        out += mask
        for (i, b) in payload.enumerated() { out.append(b ^ mask[i % 4]) }
        return out
    }
}

private func format(_ value: Double, _ decimals: Int) -> String {
    String(format: "%.\(decimals)f", value)
}

/// Right-aligned in `width` columns.
private func pad(_ text: String, _ width: Int) -> String {
    text.count >= width ? text : String(repeating: " ", count: width - text.count) + text
}
