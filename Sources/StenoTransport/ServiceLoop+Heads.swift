// New connections counted until their first request head is complete (`HeadBudget`), and the
// ones past its limits refused as they are accepted, before lws makes anything of them: the
// answer is written straight to the fresh socket (its send buffer is empty, so the write does
// not block) and lws closes it, with no connection made and none to unmake.

import CLibWebSockets
import CLwsShims
import Glibc

extension ServiceLoop {
    /// lws has accepted `socket` (`FILTER_NETWORK_CONNECTION`): counted, or refused (non-zero).
    func admitSocket(_ socket: Int32) -> Int32 {
        guard let refusal = heads.admit(socket: socket, from: Self.peerAddress(socket)) else { return 0 }
        delegate.refusedConnection(refusal)
        // Under TLS the socket speaks TLS first: it is closed without an answer.
        if !configuration.usesTLS {
            let answer = Self.refusal(refusal, server: configuration.serverName)
            _ = answer.withUnsafeBytes { send(socket, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL | MSG_DONTWAIT)) }
        }
        return 1
    }

    /// lws made a connection of an accepted socket (`SERVER_NEW_CLIENT_INSTANTIATED`).
    func adoptedSocket(_ wsi: OpaquePointer) {
        heads.adopted(socket: lws_get_socket_fd(wsi), as: wsi)
    }

    /// The connection's first request head is complete, or it is gone.
    func headFinished(_ wsi: OpaquePointer) {
        heads.finished(wsi)
    }

    static func refusal(_ refusal: ConnectionRefusal, server: String) -> [UInt8] {
        let (status, body) = switch refusal {
        case .addressLimit: ("429 Too Many Requests", #"{"status":"too_many_connections","retryAfter":1}"#)
        case .headBudget: ("503 Service Unavailable", #"{"status":"busy","retryAfter":1}"#)
        }
        return Array(("HTTP/1.1 \(status)\r\nServer: \(server)\r\nRetry-After: 1\r\nContent-Type: application/json\r\n"
            + "Content-Length: \(body.utf8.count)\r\nConnection: close\r\n\r\n\(body)").utf8)
    }

    /// The socket's peer address, written by lws as it writes a connection's
    /// (`ServiceLoop.peerAddress(_:)`), so that both compare alike.
    static func peerAddress(_ socket: Int32) -> String {
        address { lws_get_peer_simple_fd(socket, $0, $1) }
    }

    /// What lws writes into a buffer for an address ("" if it writes none).
    static func address(_ write: (UnsafeMutablePointer<CChar>, Int) -> UnsafePointer<CChar>?) -> String {
        var buffer = [CChar](repeating: 0, count: 64)
        guard buffer.withUnsafeMutableBufferPointer({ write($0.baseAddress!, $0.count) }) != nil else { return "" }
        return String(decoding: buffer.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
    }
}
