import CEpoll
import Foundation
import StenoCore
import StenoTestSupport

#if canImport(Glibc)
import Glibc
#endif

// `steno-bench capacity --client epoll` (the default): every talker of a round on ONE client
// thread (non-blocking sockets, level-triggered epoll), each doing what ``streamSession`` does
// on a thread of its own: connect when its time comes, upgrade (a refusal is kept with its
// head and body), `start`, its 20 ms frames in real time, `end`, read until `ended`, close.
// With a thread per talker, 16–32 client threads took the server's cores from its workers on
// a 2-core machine; one thread that sleeps between frames costs little.

/// What became of one talker of ``EpollTalkers``.
enum EpollTalkerOutcome {
    /// The upgrade was answered with another status (the response with its body).
    case refused(TestHTTPResponse)
    case failed(String)
    case streamed(StreamedSession)
}

/// Talkers streaming speech to a server at once, all on the calling thread.
final class EpollTalkers {
    /// When a talker connects (seconds after `began`) and what it sends after `start`.
    struct Plan {
        var delay: Double
        var frames: [[UInt8]]
    }

    private enum Phase { case waiting, connecting, upgrading, streaming, closing, done }

    private final class Talker {
        let index: Int
        let plan: Plan
        var phase = Phase.waiting
        var fd: Int32 = -1
        var openedAt = 0.0
        var input: [UInt8] = []
        /// Bytes queued and not yet written from `outputOffset` on (a full socket keeps them).
        var output: [UInt8] = []
        var outputOffset = 0
        var queuedBytes = 0, writtenBytes = 0
        /// Where each queued frame of audio ends in `queuedBytes`: its send time is taken when
        /// `writtenBytes` passes it.
        var frameEnds: [Int] = []
        var watchingWrites = false
        var nextFrame = 0
        var endQueued = false
        /// A fragmented message's opcode and the payload so far.
        var messageOpcode: UInt8 = 0
        var message: [UInt8] = []
        var record = StreamedSession()
        var ended = false
        var closeBy = 0.0
        var outcome: EpollTalkerOutcome?
        init(index: Int, plan: Plan) { self.index = index; self.plan = plan }
    }

    private let port: Int
    private let began: Double
    private let startFrame: [UInt8]
    private let endFrame = maskedFrame(opcode: 1, Array(#"{"type":"end"}"#.utf8))
    private let request: [UInt8]
    private let epoll: Int32
    private var talkers: [Talker]
    private var byFD: [Int32: Talker] = [:]
    private var remaining: Int
    private var buffer = [UInt8](repeating: 0, count: 65536)

    /// Talker `i` connects at `began + plans[i].delay` (monotonic seconds) and sends `start`.
    init(port: Int, began: Double, start: String, plans: [Plan]) {
        self.port = port
        self.began = began
        startFrame = maskedFrame(opcode: 1, Array(start.utf8))
        request = upgradeRequest(port: port)
        epoll = epoll_create1(Int32(EPOLL_CLOEXEC))
        talkers = plans.enumerated().map { Talker(index: $0.offset, plan: $0.element) }
        remaining = plans.count
    }

    deinit {
        for t in talkers where t.fd >= 0 { close(t.fd) }
        if epoll >= 0 { close(epoll) }
    }

    /// Runs every talker to its end. Each text message read goes to `handle` with the talker's
    /// index, its type, its members and the monotonic time it was read.
    func run(_ handle: (_ talker: Int, _ type: String, _ event: JSONObject, _ at: Double) -> Void) -> [EpollTalkerOutcome] {
        guard epoll >= 0 else { return talkers.map { _ in .failed("epoll_create1: \(String(cString: strerror(errno)))") } }
        var events = [epoll_event](repeating: epoll_event(), count: 256)
        while remaining > 0 {
            let now = monotonicSeconds()
            var wake = now + 1
            for t in talkers {
                switch t.phase {
                case .waiting:
                    let at = began + t.plan.delay
                    if now >= at { open(t, now) } else { wake = min(wake, at) }
                case .connecting, .upgrading:
                    if now - t.openedAt > 30 { fail(t, "no upgrade within 30 s") }
                case .streaming:
                    sendDue(t, now)
                    if !t.endQueued { wake = min(wake, t.record.startedAt + Double(t.nextFrame) * 0.02) }
                    else if now - t.record.endSentAt > 120 { fail(t, "no ended within 120 s of end") }
                case .closing:
                    if now > t.closeBy { finish(t) } else { wake = min(wake, t.closeBy) }
                case .done:
                    break
                }
            }
            guard remaining > 0 else { break }
            let wait = Int32(max(0, ((wake - monotonicSeconds()) * 1000).rounded(.up)))
            let n = epoll_wait(epoll, &events, Int32(events.count), wait)
            if n < 0 {
                if errno == EINTR { continue }
                let why = "epoll_wait: \(String(cString: strerror(errno)))"
                for t in talkers where t.phase != .done { fail(t, why) }
                break
            }
            for i in 0..<Int(n) {
                guard let t = byFD[events[i].data.fd] else { continue }
                service(t, events[i].events, handle)
            }
        }
        return talkers.map { $0.outcome ?? .failed("no outcome") }
    }

    // MARK: Connections

    private func open(_ t: Talker, _ now: Double) {
        t.openedAt = now
        switch connectNonBlocking(port: port) {
        case .failure(let error):
            t.outcome = .failed(error.description)
            t.phase = .done
            remaining -= 1
        case .success(let fd):
            t.fd = fd
            t.phase = .connecting
            byFD[fd] = t
            watch(t, writes: true, op: EPOLL_CTL_ADD)
        }
    }

    private func watch(_ t: Talker, writes: Bool, op: Int32 = EPOLL_CTL_MOD) {
        var event = epoll_event()
        event.events = EPOLLIN.rawValue | (writes ? EPOLLOUT.rawValue : 0)
        event.data.fd = t.fd
        epoll_ctl(epoll, op, t.fd, &event)
        t.watchingWrites = writes
    }

    private func service(_ t: Talker, _ events: UInt32,
                         _ handle: (_ talker: Int, _ type: String, _ event: JSONObject, _ at: Double) -> Void) {
        if t.phase == .connecting {
            let error = connectError(t.fd)
            if error != 0 { fail(t, "connect: \(String(cString: strerror(error)))"); return }
            guard events & (EPOLLOUT.rawValue | EPOLLERR.rawValue | EPOLLHUP.rawValue) != 0 else { return }
            t.phase = .upgrading
            queue(t, request)
            flush(t)
            return
        }
        if events & EPOLLOUT.rawValue != 0 { flush(t) }
        if t.phase != .done, events & (EPOLLIN.rawValue | EPOLLERR.rawValue | EPOLLHUP.rawValue) != 0 { readAll(t, handle) }
    }

    /// Reads what the socket holds and acts on it.
    private func readAll(_ t: Talker, _ handle: (_ talker: Int, _ type: String, _ event: JSONObject, _ at: Double) -> Void) {
        var eof = false
        while true {
            let n = read(t.fd, &buffer, buffer.count)
            if n > 0 {
                t.input.append(contentsOf: buffer[0..<n])
                if n < buffer.count { break }
                continue
            }
            if n < 0 && errno == EINTR { continue }
            if n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK) { break }
            if n < 0 && t.phase != .closing {
                fail(t, "read: \(String(cString: strerror(errno)))")
                return
            }
            eof = true
            break
        }
        let now = monotonicSeconds()
        if t.phase == .upgrading { readHead(t, now, eof: eof) }
        if t.phase == .streaming || t.phase == .closing { readFrames(t, now, handle) }
        if eof && t.phase != .done {
            if t.phase == .closing { finish(t) } else { fail(t, "the server closed the connection (\(t.phase)) before ended") }
        }
    }

    /// The answer to the upgrade: 101 starts the session, anything else is a refusal (once
    /// its body has come).
    private func readHead(_ t: Talker, _ now: Double, eof: Bool) {
        guard let end = httpHeadEnd(t.input) else {
            if eof { fail(t, "closed during the upgrade") }
            return
        }
        var response = TestHTTPResponse()
        var lines = String(decoding: t.input[0..<end], as: UTF8.self).components(separatedBy: "\r\n")
        let statusLine = lines.removeFirst().split(separator: " ", maxSplits: 2)
        response.status = statusLine.count >= 2 ? Int(statusLine[1]) ?? 0 : 0
        response.reason = statusLine.count > 2 ? String(statusLine[2]) : ""
        for line in lines {
            guard let colon = line.firstIndex(of: ":") else { continue }
            response.headers.append((String(line[..<colon]), line[line.index(after: colon)...].trimmingCharacters(in: .whitespaces)))
        }
        if response.status == 101 {
            guard response.header("sec-websocket-accept") == upgradeAccept else {
                fail(t, "bad Sec-WebSocket-Accept: \(response.header("sec-websocket-accept") ?? "none")")
                return
            }
            t.input.removeFirst(end + 4)
            t.phase = .streaming
            queue(t, startFrame)
            flush(t)
            guard t.phase == .streaming else { return }
            t.record.startedAt = monotonicSeconds()
            t.record.sendTimes.reserveCapacity(t.plan.frames.count)
            sendDue(t, t.record.startedAt)
            return
        }
        let body = t.input.count - (end + 4)
        if let length = response.header("content-length").flatMap({ Int($0) }) {
            guard body >= length else {
                if eof { fail(t, "closed in the body of a \(response.status)") }
                return
            }
            response.body = Array(t.input[(end + 4)..<(end + 4 + length)])
        } else {
            guard eof else { return }
            response.body = Array(t.input[(end + 4)...])
        }
        t.outcome = .refused(response)
        finish(t)
    }

    private func readFrames(_ t: Talker, _ now: Double,
                            _ handle: (_ talker: Int, _ type: String, _ event: JSONObject, _ at: Double) -> Void) {
        while t.phase == .streaming || t.phase == .closing, let frame = takeServerFrame(&t.input) {
            switch frame.opcode {
            case 0, 1, 2:
                if frame.opcode != 0 {
                    t.messageOpcode = frame.opcode
                    t.message = frame.payload
                } else {
                    t.message += frame.payload
                }
                guard frame.fin else { continue }
                let text = String(decoding: t.message, as: UTF8.self)
                t.message = []
                guard t.messageOpcode == 1, !t.ended else { continue }
                guard case .object(let event)? = try? JSONParser().parse(text), case .string(let type)? = event["type"] else { continue }
                if type == "ended" {
                    t.ended = true
                    t.record.endedAt = now
                }
                handle(t.index, type, event, now)
                if t.ended {
                    t.outcome = .streamed(t.record)
                    t.phase = .closing
                    t.closeBy = now + 5
                    queue(t, maskedFrame(opcode: 8, [0x03, 0xe8]))
                    flush(t)
                }
            case 8:
                if t.phase == .closing { finish(t); return }
                let code = frame.payload.count >= 2 ? String(Int(frame.payload[0]) << 8 | Int(frame.payload[1])) : "no code"
                let reason = String(decoding: frame.payload.dropFirst(2), as: UTF8.self)
                fail(t, "closed (\(code) \(reason)) before ended")
                return
            case 9:
                queue(t, maskedFrame(opcode: 10, frame.payload))
                flush(t)
            default:
                break
            }
        }
    }

    // MARK: Sending

    /// Queues the frames (and after the last, `end`) whose time has come: frame `k` at
    /// `startedAt + 0.02 k`, `end` at `startedAt + 0.02 × frames`, as ``streamSession`` sends them.
    private func sendDue(_ t: Talker, _ now: Double) {
        let frames = t.plan.frames
        var queued = false
        while !t.endQueued, now >= t.record.startedAt + Double(t.nextFrame) * 0.02 {
            if t.nextFrame < frames.count {
                queue(t, maskedFrame(opcode: 2, frames[t.nextFrame]))
                t.frameEnds.append(t.queuedBytes)
                t.nextFrame += 1
            } else {
                t.record.endSentAt = monotonicSeconds()
                queue(t, endFrame)
                t.endQueued = true
            }
            queued = true
        }
        if queued { flush(t) }
    }

    private func queue(_ t: Talker, _ bytes: [UInt8]) {
        t.output += bytes
        t.queuedBytes += bytes.count
    }

    /// Writes what is queued until the socket is full (then waits for EPOLLOUT), and takes the
    /// send time of every frame of audio now wholly written.
    private func flush(_ t: Talker) {
        while t.outputOffset < t.output.count {
            let n = t.output.withUnsafeBytes { write(t.fd, $0.baseAddress! + t.outputOffset, t.output.count - t.outputOffset) }
            if n > 0 {
                t.outputOffset += n
                t.writtenBytes += n
                continue
            }
            if n < 0 && errno == EINTR { continue }
            if n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK) { break }
            if t.phase == .closing { finish(t) } else { fail(t, "write: \(String(cString: strerror(errno)))") }
            return
        }
        if let first = t.frameEnds.first, first <= t.writtenBytes {
            let now = monotonicSeconds()
            while let end = t.frameEnds.first, end <= t.writtenBytes {
                t.record.sendTimes.append(now)
                t.frameEnds.removeFirst()
            }
        }
        if t.outputOffset == t.output.count {
            t.output.removeAll(keepingCapacity: true)
            t.outputOffset = 0
        }
        let pending = !t.output.isEmpty || t.phase == .connecting
        if pending != t.watchingWrites { watch(t, writes: pending) }
    }

    // MARK: Ends

    private func fail(_ t: Talker, _ why: String) {
        if t.outcome == nil { t.outcome = .failed(why) }
        finish(t)
    }

    private func finish(_ t: Talker) {
        guard t.phase != .done else { return }
        if t.fd >= 0 {
            epoll_ctl(epoll, EPOLL_CTL_DEL, t.fd, nil)
            close(t.fd)
            byFD[t.fd] = nil
            t.fd = -1
        }
        t.phase = .done
        remaining -= 1
    }
}

/// CPU seconds (user + system) the calling thread has used since it started.
func threadCPUSeconds() -> Double {
    var spec = timespec()
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &spec)
    return Double(spec.tv_sec) + Double(spec.tv_nsec) / 1e9
}
