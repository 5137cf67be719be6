import Foundation
import StenoSystem
import Synchronization

/// A TCP relay on 127.0.0.1 in front of a server, that a test can cut: every connection it
/// accepted is closed at once on both sides (a network that failed, as far as each end can
/// tell: neither gets a close frame). New connections are relayed again afterwards.
public final class TCPProxy: @unchecked Sendable {
    public let port: Int
    private let target: Atomic<Int>
    private let listener: Int32
    private let state = Locked(State())
    private let stopping = Atomic<Bool>(false)
    private let clientBytes = Atomic<Int>(0)

    private struct State {
        var pairs: [(client: Int32, server: Int32)] = []
        var accepted = 0
        /// While refusing, new connections are closed as soon as they are accepted.
        var refusing = false
        /// While muted, what either side sends is read and dropped.
        var muted = false
    }

    public init(targetPort: Int) throws {
        self.target = Atomic(targetPort)
        (listener, port) = try loopbackListener()
        let thread = Thread { [self] in acceptLoop() }
        thread.name = "test-proxy"
        thread.start()
    }

    deinit { stop() }

    /// Connections accepted so far.
    public var acceptedCount: Int { state.withLock { $0.accepted } }

    /// Bytes relayed from clients to the server so far, over every connection.
    public var bytesFromClients: Int { clientBytes.load(ordering: .relaxed) }

    /// Closes every relayed connection now.
    public func cut() {
        // Under the lock: a relay closes its sockets under it too, so these are still its.
        state.withLock { s in
            for pair in s.pairs {
                shutdown(pair.client, Int32(SHUT_RDWR))
                shutdown(pair.server, Int32(SHUT_RDWR))
            }
            s.pairs = []
        }
    }

    /// While true, connections are accepted and closed at once (a server that is unreachable
    /// though the address answers).
    public func refuse(_ refusing: Bool) { state.withLock { $0.refusing = refusing } }

    /// While true, what either side sends is read and thrown away: to the client, a server that
    /// went silent though its TCP still takes everything (its window never closes).
    public func mute(_ muted: Bool) { state.withLock { $0.muted = muted } }

    /// New connections go to this port from now on (another server behind the same address).
    public func retarget(_ port: Int) { target.store(port, ordering: .relaxed) }

    public func stop() {
        guard !stopping.exchange(true, ordering: .relaxed) else { return }
        shutdown(listener, Int32(SHUT_RDWR))
        close(listener)
        cut()
    }

    private func acceptLoop() {
        while !stopping.load(ordering: .relaxed) {
            let client = accept(listener, nil, nil)
            if client < 0 {
                if errno == EINTR { continue }
                return
            }
            let refusing = state.withLock { s -> Bool in
                s.accepted += 1
                return s.refusing
            }
            if refusing {
                close(client)
                continue
            }
            guard let server = Self.connectTo(target.load(ordering: .relaxed)) else {
                close(client)
                continue
            }
            state.withLock { $0.pairs.append((client, server)) }
            let thread = Thread { [self] in relay(client, server) }
            thread.name = "test-proxy-relay"
            thread.start()
        }
    }

    private static func connectTo(_ port: Int) -> Int32? {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        guard fd >= 0 else { return nil }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        address.sin_port = UInt16(port).bigEndian
        let connected = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
        }
        if connected != 0 {
            close(fd)
            return nil
        }
        return fd
    }

    /// Copies both ways until either side ends (or the pair is cut).
    private func relay(_ a: Int32, _ b: Int32) {
        var buffer = [UInt8](repeating: 0, count: 64 * 1024)
        var fds = [pollfd(fd: a, events: Int16(POLLIN), revents: 0), pollfd(fd: b, events: Int16(POLLIN), revents: 0)]
        loop: while true {
            let n = poll(&fds, 2, 1000)
            if n < 0 && errno == EINTR { continue }
            if n < 0 { break }
            for i in 0..<2 where fds[i].revents != 0 {
                let from = fds[i].fd, to = fds[1 - i].fd
                let count = buffer.withUnsafeMutableBytes { read(from, $0.baseAddress, $0.count) }
                if count <= 0 { break loop }
                if state.withLock({ $0.muted }) { continue }
                var offset = 0
                while offset < count {
                    let written = buffer.withUnsafeBytes { send(to, $0.baseAddress! + offset, count - offset, Int32(MSG_NOSIGNAL)) }
                    if written <= 0 { break loop }
                    offset += written
                    if i == 0 { clientBytes.add(written, ordering: .relaxed) }
                }
            }
        }
        state.withLock { s in
            s.pairs.removeAll { $0.client == a }
            close(a)
            close(b)
        }
    }
}
