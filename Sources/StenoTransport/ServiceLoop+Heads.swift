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

    /// The socket's peer address, as lws writes it (IPv4 dotted, IPv6 as `inet_ntop` does).
    static func peerAddress(_ socket: Int32) -> String {
        var storage = sockaddr_storage()
        var length = socklen_t(MemoryLayout<sockaddr_storage>.size)
        let got = withUnsafeMutablePointer(to: &storage) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getpeername(socket, $0, &length) }
        }
        guard got == 0 else { return "" }
        var text = [CChar](repeating: 0, count: Int(INET6_ADDRSTRLEN))
        let family = Int32(storage.ss_family)
        let written: UnsafePointer<CChar>? = withUnsafePointer(to: &storage) { pointer in
            switch family {
            case AF_INET:
                pointer.withMemoryRebound(to: sockaddr_in.self, capacity: 1) { address in
                    withUnsafePointer(to: address.pointee.sin_addr) { inet_ntop(AF_INET, $0, &text, socklen_t(text.count)) }
                }
            case AF_INET6:
                pointer.withMemoryRebound(to: sockaddr_in6.self, capacity: 1) { address in
                    withUnsafePointer(to: address.pointee.sin6_addr) { inet_ntop(AF_INET6, $0, &text, socklen_t(text.count)) }
                }
            default:
                nil
            }
        }
        guard written != nil else { return "" }
        return String(decoding: text.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
    }
}
