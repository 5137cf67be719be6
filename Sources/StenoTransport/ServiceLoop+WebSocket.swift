import CLibWebSockets
import CLwsShims
import Foundation
import StenoCore
import Synchronization

extension ServiceLoop {
    // MARK: - WebSocket connections

    func connectionID(of wsi: OpaquePointer) -> ConnectionID? {
        guard let raw = lws_get_opaque_user_data(wsi) else { return nil }
        return ConnectionID(rawValue: UInt64(UInt(bitPattern: raw)))
    }

    func confirmUpgrade(_ wsi: OpaquePointer, upgrade: String) -> Int32 {
        // A name left by an upgrade that failed between here and FILTER_PROTOCOL_CONNECTION
        // must not match this one's offer.
        clearSubprotocolAlias()
        switch upgrade.lowercased() {
        case "websocket":
            break
        case "h2c":
            // Not offered (HTTP/1.1 only).
            return refuse(wsi, .plain(status: 400))
        default:
            // lws has already answered an unknown upgrade with 403 itself and still
            // asks: just hang up.
            return -1
        }
        if let tooLarge = headTooLarge(wsi) {
            delegate.refusedMalformedUpgrade(status: tooLarge.status)
            return refuse(wsi, tooLarge)
        }
        let validation = HandshakeValidation(httpVersion: headerValue(wsi, WSI_TOKEN_HTTP),
                                             version: headerValue(wsi, WSI_TOKEN_VERSION), key: headerValue(wsi, WSI_TOKEN_KEY),
                                             host: headerValue(wsi, WSI_TOKEN_HOST), connection: headerValue(wsi, WSI_TOKEN_CONNECTION),
                                             subprotocols: headerValue(wsi, WSI_TOKEN_PROTOCOL))
        let offered: [String]
        let speaksOffered: Bool
        switch validation.check() {
        case .refuse(let response):
            configuration.log(.debug, "refused a malformed WebSocket handshake from \(peerAddress(wsi)): HTTP \(response.status)")
            delegate.refusedMalformedUpgrade(status: response.status)
            return refuse(wsi, response)
        case .valid(let list, let speaks):
            offered = list
            speaksOffered = speaks
        }
        let request = UpgradeRequest(path: uriPath(wsi) ?? "", query: queryItems(wsi), headers: requestHeaders(wsi), remoteAddress: peerAddress(wsi))
        let decision = delegate.decideUpgrade(request)
        defer { drainCommands() }
        switch decision {
        case .accept:
            pendingUpgrades[wsi] = request
            if !offered.isEmpty && !speaksOffered { unselectedSubprotocol(offered[0]) }
            return 0
        case .acceptNaming(let subprotocol):
            pendingUpgrades[wsi] = request
            if !speaksOffered && offered.first == subprotocol {
                unselectedSubprotocol(subprotocol)
                namingSubprotocol = true
            } else if !offered.isEmpty && !speaksOffered {
                unselectedSubprotocol(offered[0])
            }
            return 0
        case .reject(let response):
            return refuse(wsi, response)
        }
    }

    /// A client that offers only subprotocols Steno does not speak is to be answered without
    /// one (RFC 6455 §4.2.2: the server "MUST NOT send back a |Sec-WebSocket-Protocol| header
    /// field"). lws 4.1.6 instead drops such an upgrade with no response at all
    /// (`lws_process_ws_upgrade`: "No supported protocol"). So for this upgrade the transport's
    /// second protocol takes the name of the first offered one, which lws then binds; its name is
    /// emptied again in FILTER_PROTOCOL_CONNECTION, which lws calls after binding and before it
    /// writes the 101, and lws names no subprotocol for a protocol whose name is empty
    /// (`handshake_0405`). Everything happens on this thread, within one call of lws's.
    func unselectedSubprotocol(_ name: String) {
        let bytes = Array(name.utf8.prefix(LwsContextStorage.aliasNameCapacity - 1))
        for (i, b) in bytes.enumerated() { storage.aliasName[i] = CChar(bitPattern: b) }
        storage.aliasName[bytes.count] = 0
    }

    func clearSubprotocolAlias() {
        storage.aliasName[0] = 0
        namingSubprotocol = false
    }

    /// 431 when the request head is over `maxRequestHeaderBytes` (counted as libwebsockets
    /// holds it: the URI and the values of the headers it knows).
    func headTooLarge(_ wsi: OpaquePointer) -> HTTPResponse? {
        var total = 0
        for token in 0..<Int(_WSI_TOKEN_CLIENT_SENT_PROTOCOLS.rawValue) {
            let n = lws_hdr_total_length(wsi, lws_token_indexes(rawValue: UInt32(token)))
            if n > 0 { total += Int(n) }
        }
        guard total > configuration.maxRequestHeaderBytes else { return nil }
        configuration.log(.info, "a request head of \(total) bytes from \(peerAddress(wsi)) is over \(configuration.maxRequestHeaderBytes); answered 431")
        return HTTPResponse(status: 431, text: "431 Request Header Fields Too Large: this server takes request headers of up to \(configuration.maxRequestHeaderBytes) bytes\n")
    }

    /// Answers an upgrade request with an HTTP response and hangs up. lws 4.1 lets
    /// HTTP_CONFIRM_UPGRADE write the answer itself (as `lws_return_http_status`
    /// does) and return -1: the connection is then closed after lws flushed what it
    /// could not send at once.
    func refuse(_ wsi: OpaquePointer, _ response: HTTPResponse) -> Int32 {
        guard let bytes = encodeResponse(wsi, response, includeBody: true, close: true, beforeUpgrade: true) else { return -1 }
        let pre = steno_lws_pre
        let buffer = UnsafeMutableRawPointer.allocate(byteCount: pre + bytes.count, alignment: 16)
        defer { buffer.deallocate() }
        bytes.withUnsafeBytes { (buffer + pre).copyMemory(from: $0.baseAddress!, byteCount: $0.count) }
        _ = lws_write(wsi, (buffer + pre).assumingMemoryBound(to: UInt8.self), bytes.count, LWS_WRITE_HTTP_FINAL)
        return -1
    }

    func established(_ wsi: OpaquePointer) -> Int32 {
        guard let request = pendingUpgrades.removeValue(forKey: wsi) else { return -1 }
        let id = ConnectionID(rawValue: nextID)
        nextID += 1
        lws_set_opaque_user_data(wsi, UnsafeMutableRawPointer(bitPattern: UInt(id.rawValue)))
        let c = LiveConnection(id: id, wsi: wsi, address: request.remoteAddress, maxMessageSize: configuration.maxMessageSize)
        connections[id] = c
        handle.register(id)
        delegate.opened(id, request: request)
        drainCommands()
        return 0
    }

    /// The peer was heard from. Data proves it is there as well as a pong does: without this, a
    /// client sending audio faster than it is analyzed, whose pong waits in the socket behind
    /// audio the server is not reading yet (flow control), would be hung up on by the keepalive.
    func heard(_ c: LiveConnection) {
        c.lastHeard = .now
        c.pinged = false
    }

    func receive(_ wsi: OpaquePointer, _ input: UnsafeMutableRawPointer?, _ length: Int) -> Int32 {
        guard let id = connectionID(of: wsi), let c = connections[id] else { return -1 }
        if c.closing != nil { return 0 }  // closing: the session is over
        heard(c)
        let piece = UnsafeRawBufferPointer(start: input, count: input == nil ? 0 : length)
        // What the frame's header says is still to come counts at once: a header declaring
        // 2^32 bytes is too large with its first piece, not once 64 KB of it have arrived.
        // (lws 4.1.6 calls nothing for a frame before its first payload byte: a header alone
        // is found by `refuseAnnouncedOverLimit` on the tick.)
        let announced = Int(clamping: lws_remaining_packet_payload(wsi))
        let final = lws_is_final_fragment(wsi) != 0
        // A piece to hold past the memory for unfinished messages: the connection is closed
        // with 1013 (try again later); its session may be resumed.
        let growth = c.assembler.growth(piece.count, final: final, remaining: announced)
        guard messages.allows(growth, from: c.address) else {
            messages.change(-c.assembler.buffered, for: c.address)
            c.assembler.reset()
            delegate.refusedMessage(id)
            handle.close(id, code: 1013, reason: "the server's memory for unfinished messages is full; try again later")
            drainCommands()
            return 0
        }
        let before = c.assembler.buffered
        defer { messages.change(c.assembler.buffered - before, for: c.address) }
        switch c.assembler.receive(piece, binary: lws_frame_is_binary(wsi) != 0, final: final,
                                   remaining: announced) {
        case .pending:
            break
        case .message(let message):
            delegate.received(id, message)
            drainCommands()
        case .tooLarge:
            delegate.tooLarge(id, limit: configuration.maxMessageSize)
            drainCommands()
        }
        return 0
    }

    /// A frame's header over the limit with no payload yet: lws 4.1.6 parses headers without a
    /// callback, so the once-a-second pass (`scanConnections`) asks what each open connection's
    /// frame still announces (`lws_remaining_packet_payload`: 0 between frames). Such a message
    /// is too large then (true when it is reported), not at its first payload byte or the idle
    /// timeout.
    func announcedTooMuch(_ c: LiveConnection) -> Bool {
        let announced = Int(clamping: lws_remaining_packet_payload(c.wsi))
        guard announced > 125 else { return false }
        let before = c.assembler.buffered
        guard c.assembler.announced(announced) == .tooLarge else { return false }
        messages.change(-before, for: c.address)
        return true
    }

    func writeable(_ wsi: OpaquePointer) -> Int32 {
        guard let id = connectionID(of: wsi), let c = connections[id] else { return 0 }
        if c.pingDue {
            c.pingDue = false
            if c.closing == nil {
                // A ping as the one write of this callback; what is queued goes next. Not empty:
                // lws 4.1 hands an empty pong to no callback, so it could not count as heard.
                let payload = (storage.httpScratch + steno_lws_pre).assumingMemoryBound(to: UInt8.self)
                payload.pointee = UInt8(ascii: "k")
                let n = lws_write(wsi, payload, 1, LWS_WRITE_PING)
                if n < 0 { return -1 }
                // A heartbeat (reading paused) says nothing of whether the peer reads.
                if !c.readingPaused { c.stalledSince = nil }
                lws_callback_on_writable(wsi)
                return 0
            }
        }
        let (taken, messageKind, more) = handle.takeNext(id)
        if let frame = taken {
            let kind = messageKind == .text ? LWS_WRITE_TEXT : LWS_WRITE_BINARY
            // One lws_write per WRITEABLE. If the socket takes only part of it, lws
            // keeps the rest and sends it before calling WRITEABLE again.
            let n = lws_write(wsi, frame.payload, frame.payloadCount, kind)
            if n < frame.payloadCount { return -1 }
            c.stalledSince = nil
            if more || c.closing != nil { lws_callback_on_writable(wsi) }
            return 0
        }
        if c.closing != nil, !c.closeFrameDue, let (code, closeReason) = handle.closeRequest(id) {
            var reason = Array(closeReason.utf8.prefix(123))
            while !reason.isEmpty, String(validatingUTF8Bytes: reason) == nil { reason.removeLast() }
            reason.withUnsafeMutableBufferPointer { r in
                lws_close_reason(wsi, lws_close_status(UInt32(code)), r.baseAddress, r.count)
            }
            scheduleClosingHandshake(c)
        }
        return 0
    }

    /// The connection on `wsi` is gone: tell the delegate, once. `mayLinger` when lws has not
    /// closed the socket yet (LWS_CALLBACK_CLOSED), which may then linger.
    func finish(_ wsi: OpaquePointer, mayLinger: Bool = false) {
        guard let id = connectionID(of: wsi) else { return }
        lws_set_opaque_user_data(wsi, nil)
        guard let c = connections.removeValue(forKey: id) else { return }
        messages.change(-c.assembler.buffered, for: c.address)
        closing.remove(id)
        let handshakeStarted = handshakesUnderWay.remove(id) != nil
        if handshakeStarted && !handshakesToStart.isEmpty { scheduleCloseTimer() }
        if mayLinger { lingerIfUseful(c, handshakeStarted: handshakeStarted) }
        let backlog = handle.unregister(id)
        delegate.closed(id, backlog: backlog)
        drainCommands()
    }
}

extension ServiceLoop {
    /// Keeps the socket of `c` open for a lingering close (`LingeringCloses`), unless the
    /// connection was cut on purpose before its close frame was on its way, or the transport
    /// is stopping.
    func lingerIfUseful(_ c: LiveConnection, handshakeStarted: Bool) {
        guard configuration.closeLingerSeconds > 0, !stopRequested.load(ordering: .acquiring) else { return }
        if case .cut? = c.closing, !handshakeStarted { return }
        let fd = lws_get_socket_fd(c.wsi)
        guard fd >= 0 else { return }
        _ = lingering.begin(fd: fd, connection: c.id, log: configuration.log)
    }
}

private extension String {
    init?(validatingUTF8Bytes bytes: [UInt8]) {
        var it = bytes.makeIterator()
        var decoder = UTF8()
        loop: while true {
            switch decoder.decode(&it) {
            case .scalarValue: continue
            case .emptyInput: break loop
            case .error: return nil
            }
        }
        self = String(decoding: bytes, as: UTF8.self)
    }
}
