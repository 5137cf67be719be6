import Foundation
import Glibc
import Synchronization

/// A client's thread that writes a WebSocket frame to a socket over and over, as fast as the
/// socket takes it, until stopped or a write fails: a client that floods the server (issue 12),
/// while the test reads on the same socket from its own thread (raw system calls, no state
/// shared with `TestStream`).
public final class SocketFlood: Sendable {
    private let running = Atomic<Bool>(true)
    private let finished = Atomic<Bool>(false)
    private let failed = Atomic<Bool>(false)
    private let written = Atomic<Int>(0)

    /// Starts writing `frame` (by default a masked 1 KB binary frame) to socket `fd`, over
    /// and over.
    public init(fd: Int32, frame: [UInt8] = WebSocketTestClient.encodeFrame(opcodeValue: 2, [UInt8](repeating: 0x55, count: 1024))) {
        Thread { [self] in run(fd, frame) }.start()
    }

    private func run(_ fd: Int32, _ frame: [UInt8]) {
        defer { finished.store(true, ordering: .releasing) }
        var at = 0
        while running.load(ordering: .relaxed) {
            var p = pollfd(fd: fd, events: Int16(POLLOUT), revents: 0)
            guard poll(&p, 1, 50) > 0 else { continue }
            let n = frame.withUnsafeBytes { Glibc.send(fd, $0.baseAddress! + at, $0.count - at, Int32(MSG_DONTWAIT) | Int32(MSG_NOSIGNAL)) }
            if n > 0 {
                at = (at + n) % frame.count
                written.add(n, ordering: .relaxed)
            } else if n < 0 && errno != EAGAIN && errno != EINTR {
                failed.store(true, ordering: .relaxed)
                return
            }
        }
    }

    /// Bytes written so far.
    public var bytes: Int { written.load(ordering: .relaxed) }

    /// Waits until a write fails (the server's end is gone).
    public func waitUntilItFails(timeout: Double) -> Bool {
        let deadline = Deadline(timeout)
        while !failed.load(ordering: .relaxed) {
            if deadline.remainingMilliseconds <= 0 { return false }
            usleep(10_000)
        }
        return true
    }

    /// Stops writing (and waits for the thread to stop).
    public func stop() {
        running.store(false, ordering: .relaxed)
        while !finished.load(ordering: .acquiring) { usleep(1000) }
    }

    /// How the stream from the server ends, once what is left is read: 0 for a FIN, else the
    /// errno (ECONNRESET for a reset), or -1 if it has not ended within 10 s.
    public static func endOfStream(_ fd: Int32) -> Int32 {
        var scratch = [UInt8](repeating: 0, count: 4096)
        let deadline = Deadline(10)
        while deadline.remainingMilliseconds > 0 {
            var p = pollfd(fd: fd, events: Int16(POLLIN), revents: 0)
            guard poll(&p, 1, 100) > 0 else { continue }
            let n = scratch.withUnsafeMutableBytes { recv(fd, $0.baseAddress!, $0.count, Int32(MSG_DONTWAIT)) }
            if n == 0 { return 0 }
            if n < 0 && errno != EAGAIN && errno != EINTR { return errno }
        }
        return -1
    }
}
