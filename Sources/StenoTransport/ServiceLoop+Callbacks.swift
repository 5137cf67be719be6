// The one entry point of lws's callbacks into the service loop (`callback`): each reason
// lws calls with, sent to the code that handles it (upgrades, WebSocket frames, writes,
// HTTP, closes), which lives in the other ServiceLoop files.

import CLibWebSockets

extension ServiceLoop {
    func callback(_ wsi: OpaquePointer?, _ reason: lws_callback_reasons, _ input: UnsafeMutableRawPointer?, _ length: Int) -> Int32 {
        let outer = currentWSI
        currentWSI = wsi
        defer { currentWSI = outer }
        switch reason {
        case LWS_CALLBACK_EVENT_WAIT_CANCELLED:
            drainCommands()
            return 0

        case LWS_CALLBACK_FILTER_NETWORK_CONNECTION:
            // On the listening socket's wsi; the accepted socket's descriptor comes as `in`.
            return admitSocket(Int32(truncatingIfNeeded: Int(bitPattern: input)))

        case LWS_CALLBACK_SERVER_NEW_CLIENT_INSTANTIATED:
            if let wsi { adoptedSocket(wsi) }
            return 0

        case LWS_CALLBACK_HTTP_CONFIRM_UPGRADE:
            guard let wsi else { return -1 }
            headFinished(wsi)
            return confirmUpgrade(wsi, upgrade: input.map { String(cString: $0.assumingMemoryBound(to: CChar.self)) } ?? "")

        case LWS_CALLBACK_FILTER_PROTOCOL_CONNECTION:
            // lws has bound the protocol (the alias, if `unselectedSubprotocol` named it): from
            // here on its name must be empty, so the 101 names no subprotocol, unless the
            // decision was to name it (the next upgrade's confirmation empties it first).
            if !namingSubprotocol { clearSubprotocolAlias() }
            // Only upgrades this transport accepted in HTTP_CONFIRM_UPGRADE go on.
            guard let wsi, pendingUpgrades[wsi] != nil else { return 1 }
            return 0

        case LWS_CALLBACK_WS_PEER_INITIATED_CLOSE:
            // RFC 6455 §5.5.1: a close frame's body, if any, starts with a 2-byte code; a code
            // of 5000 or more is not allowed (§7.4.2), nor is a body of 1 byte. lws 4.1.6 turns
            // the other invalid codes into 1002 itself, by rewriting the code in the body it
            // then echoes; the same is done here for 5000 and above, so the reply goes out and
            // the connection ends at once, as for any close. A 1-byte body cannot be rewritten
            // into a code (lws echoes as many bytes as came): lws is told to close with 1002
            // instead, and then waits up to 5 s for an answer that the peer, whose close came
            // first, will not send (docs/reliability.md).
            guard let wsi, let input else { return 0 }
            if length >= 2 {
                let body = input.assumingMemoryBound(to: UInt8.self)
                if UInt16(body[0]) << 8 | UInt16(body[1]) >= 5000 {
                    body[0] = UInt8(LWS_CLOSE_STATUS_PROTOCOL_ERR.rawValue >> 8)
                    body[1] = UInt8(LWS_CLOSE_STATUS_PROTOCOL_ERR.rawValue & 0xff)
                }
                return 0
            }
            guard length == 1 else { return 0 }
            var reason = Array("close frame of 1 byte".utf8)
            reason.withUnsafeMutableBufferPointer { r in
                lws_close_reason(wsi, LWS_CLOSE_STATUS_PROTOCOL_ERR, r.baseAddress, r.count)
            }
            return -1

        case LWS_CALLBACK_ESTABLISHED:
            guard let wsi else { return -1 }
            return established(wsi)

        case LWS_CALLBACK_RECEIVE:
            guard let wsi else { return -1 }
            return receive(wsi, input, length)

        case LWS_CALLBACK_RECEIVE_PONG:
            if let wsi, let id = connectionID(of: wsi), let c = connections[id] { heard(c) }
            return 0

        case LWS_CALLBACK_SERVER_WRITEABLE:
            guard let wsi else { return -1 }
            return writeable(wsi)

        case LWS_CALLBACK_CLOSED:
            // lws has shut the socket's sending side and closes it next: the last moment to
            // keep it open for a lingering close.
            if let wsi { finish(wsi, mayLinger: true) }
            return 0

        case LWS_CALLBACK_HTTP:
            guard let wsi else { return -1 }
            headFinished(wsi)
            return http(wsi)

        case LWS_CALLBACK_HTTP_BODY:
            guard let wsi else { return -1 }
            return bodyReceived(wsi, UnsafeRawBufferPointer(start: input, count: length))

        case LWS_CALLBACK_HTTP_BODY_COMPLETION:
            guard let wsi else { return -1 }
            return bodyComplete(wsi)

        case LWS_CALLBACK_HTTP_WRITEABLE:
            guard let wsi else { return -1 }
            return httpWriteable(wsi)

        case LWS_CALLBACK_CLOSED_HTTP:
            if let wsi {
                httpResponses[wsi] = nil
                if let body = httpBodies.removeValue(forKey: wsi) { httpExchanges[body.exchange] = nil }
                pendingUpgrades[wsi] = nil
                headFinished(wsi)
            }
            return 0

        case LWS_CALLBACK_WSI_DESTROY:
            // Sent for every wsi, however far it got: the last word on it.
            if let wsi {
                httpResponses[wsi] = nil
                if let body = httpBodies.removeValue(forKey: wsi) { httpExchanges[body.exchange] = nil }
                pendingUpgrades[wsi] = nil
                headFinished(wsi)
                finish(wsi)
            }
            return 0

        default:
            // Everything else (protocol init/destroy, bind/drop, network filters,
            // HTTP bodies we do not read, peer-initiated close, …) needs no action.
            return 0
        }
    }
}
