import CLibWebSockets
import CLwsShims
import Glibc
import StenoSystem

/// Lingering closes (issue 12). When a socket is closed while bytes it received are still
/// unread, Linux answers with a reset, not a FIN, and drops what the socket had not sent yet:
/// a client that floods the server and is closed (4008, 1009, or a protocol error lws found)
/// then loses the close frame sent to it, and sees ECONNRESET instead. Data arriving after
/// the close is reset as well. libwebsockets 4.1.6 shuts the sending side
/// (`shutdown(SHUT_WR)`, lib/core-net/close.c) and then closes at once: the stage that
/// would wait for the peer's end of stream (`LRS_SHUTDOWN`, `PENDING_TIMEOUT_SHUTDOWN_FLUSH`)
/// is never reached, since the flag it tests is set just before.
///
/// So when lws tells Steno that a WebSocket is closed (`LWS_CALLBACK_CLOSED`, which comes
/// after that shutdown and before lws closes the descriptor, on both event loops) and its
/// socket still has bytes to read or bytes the peer has not acknowledged, the transport takes
/// a descriptor of its own on the socket (`dup`): lws's close then only drops lws's reference,
/// and the connection stays open with its sending side shut. Each tick reads and discards
/// what the peer sends, until its end of stream (it has read everything, close frame and FIN
/// included, and closed) or `closeLingerSeconds`, whichever comes first; then the socket is
/// closed. All on the service thread.
///
/// Not lingered: connections cut on purpose without a close frame (a peer silent past the
/// keepalive, one that took nothing within the close's flush deadline, a resumed session's
/// old connection), and everything when the transport stops.
final class LingeringCloses {
    struct Socket {
        let fd: Int32
        let connection: ConnectionID
        let since: ContinuousClock.Instant
        var discarded = 0
    }

    private(set) var sockets: [Socket] = []
    /// At most this many at once (each holds a descriptor); past it a close is lws's own.
    static let atOnce = 1024
    /// Bytes read and discarded per socket per tick: what a flooding peer may cost.
    static let discardPerTick = 1 << 20

    /// Takes over the socket of connection `id`, which lws is about to close, if it has
    /// bytes to read or to deliver; false if it does not linger.
    func begin(fd: Int32, connection id: ConnectionID, log: Log) -> Bool {
        var unread: Int32 = 0
        var unsent: Int32 = 0
        guard steno_socket_backlog(fd, &unread, &unsent) == 0, unread > 0 || unsent > 0 else { return false }
        guard sockets.count < Self.atOnce else {
            log(.info, "connection \(id) closed with \(unread) bytes unread and \(unsent) undelivered: \(Self.atOnce) closes linger already, so this one is not")
            return false
        }
        let own = steno_linger_take(fd)
        guard own >= 0 else {
            log(.warning, "connection \(id): no descriptor for a lingering close (errno \(errno)); closed at once")
            return false
        }
        var socket = Socket(fd: own, connection: id, since: .now)
        var discarded = 0
        let open = steno_linger_drain(own, Self.discardPerTick, &discarded) == 1
        socket.discarded = discarded
        guard open else {
            Glibc.close(own)
            return false
        }
        log(.debug, "connection \(id) closed with \(unread) bytes unread and \(unsent) undelivered: lingering")
        sockets.append(socket)
        return true
    }

    /// Reads what each lingering socket has; closes those whose peer has ended the connection
    /// and those that have lingered `seconds`.
    func service(seconds: Double, log: Log) {
        guard !sockets.isEmpty else { return }
        let now = ContinuousClock.now
        let limit = Duration.milliseconds(Int(seconds * 1000))
        var kept: [Socket] = []
        kept.reserveCapacity(sockets.count)
        for var s in sockets {
            var discarded = 0
            let open = steno_linger_drain(s.fd, Self.discardPerTick, &discarded) == 1
            s.discarded += discarded
            let lingered = now - s.since
            if open && lingered < limit {
                kept.append(s)
                continue
            }
            Glibc.close(s.fd)
            log(.debug, "connection \(s.connection) lingered \(lingered.components.seconds) s (\(s.discarded) bytes discarded): \(open ? "time is up" : "the peer has closed")")
        }
        sockets = kept
    }

    func closeAll() {
        for s in sockets { Glibc.close(s.fd) }
        sockets.removeAll()
    }
}
