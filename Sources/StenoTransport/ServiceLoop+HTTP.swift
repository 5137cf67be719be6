import CLibWebSockets
import CLwsShims
import Foundation
import StenoCore
import Synchronization

extension ServiceLoop {
    // MARK: - HTTP

    func http(_ wsi: OpaquePointer) -> Int32 {
        var uriPointer: UnsafeMutablePointer<CChar>?
        var uriLength: Int32 = 0
        let m = lws_http_get_uri_and_method(wsi, &uriPointer, &uriLength)
        let path: String
        if let uriPointer, uriLength >= 0 {
            path = String(decoding: UnsafeRawBufferPointer(start: uriPointer, count: Int(uriLength)), as: UTF8.self)
        } else {
            path = "/"
        }
        let method: HTTPMethod
        switch m {
        case Int32(LWSHUMETH_GET): method = .get
        case Int32(LWSHUMETH_HEAD): method = .head
        default: method = .other(Self.methodName(m))
        }
        let isHead = method == .head
        if let tooLarge = headTooLarge(wsi) { return startHTTPResponse(wsi, tooLarge, includeBody: !isHead, close: true) }
        let request = HTTPRequest(method: method, path: path, query: queryItems(wsi), headers: requestHeaders(wsi), remoteAddress: peerAddress(wsi))
        if method == .other("POST") { return startBody(wsi, request) }
        guard method == .get || isHead else {
            let response = HTTPResponse.plain(status: 405, headers: [("Allow", "GET, HEAD, POST")])
            return startHTTPResponse(wsi, response, includeBody: true, close: true)
        }
        let response = delegate.http(request) ?? .plain(status: 404)
        drainCommands()
        return startHTTPResponse(wsi, response, includeBody: !isHead, close: false)
    }

    /// A POST: its body is read (lws delivers it in HTTP_BODY) when its length is given and
    /// within `maxBodyBytes`.
    func startBody(_ wsi: OpaquePointer, _ request: HTTPRequest) -> Int32 {
        guard let length = headerValue(wsi, WSI_TOKEN_HTTP_CONTENT_LENGTH).flatMap({ Int($0) }), length >= 0 else {
            return startHTTPResponse(wsi, .plain(status: 411), includeBody: true, close: true)
        }
        guard length <= configuration.maxBodyBytes else {
            return startHTTPResponse(wsi, HTTPResponse(status: 413,
                text: "413 Content Too Large: this server takes bodies of up to \(configuration.maxBodyBytes) bytes\n"),
                includeBody: true, close: true)
        }
        nextExchange += 1
        httpBodies[wsi] = PendingHTTPBody(request: request, exchange: HTTPExchange(rawValue: nextExchange), expected: length)
        // lws says the body is complete even when it is empty.
        return 0
    }

    /// A piece of a POST's body.
    func bodyReceived(_ wsi: OpaquePointer, _ bytes: UnsafeRawBufferPointer) -> Int32 {
        // A body refused already (413): its bytes are read and dropped while the answer goes.
        guard let pending = httpBodies[wsi] else { return httpResponses[wsi] != nil ? 0 : -1 }
        guard pending.body.count + bytes.count <= configuration.maxBodyBytes else { return -1 }
        pending.body.append(contentsOf: bytes)
        return 0
    }

    /// The POST's body is whole: the delegate answers it now or later.
    func bodyComplete(_ wsi: OpaquePointer) -> Int32 {
        guard let pending = httpBodies[wsi], httpExchanges[pending.exchange] == nil else {
            return httpResponses[wsi] != nil ? 0 : -1
        }
        let response = delegate.http(pending.request, body: pending.body, exchange: pending.exchange)
        pending.body = []
        if let response {
            httpBodies[wsi] = nil
            drainCommands()
            return startHTTPResponse(wsi, response, includeBody: true, close: false)
        }
        // Answered later: lws must not time the connection out meanwhile.
        httpExchanges[pending.exchange] = wsi
        lws_set_timeout(wsi, NO_PENDING_TIMEOUT, 0)
        drainCommands()
        return 0
    }

    static func methodName(_ m: Int32) -> String {
        switch m {
        case Int32(LWSHUMETH_POST): "POST"
        case Int32(LWSHUMETH_OPTIONS): "OPTIONS"
        case Int32(LWSHUMETH_PUT): "PUT"
        case Int32(LWSHUMETH_PATCH): "PATCH"
        case Int32(LWSHUMETH_DELETE): "DELETE"
        case Int32(LWSHUMETH_CONNECT): "CONNECT"
        default: "UNKNOWN"
        }
    }

    func startHTTPResponse(_ wsi: OpaquePointer, _ response: HTTPResponse, includeBody: Bool, close: Bool,
                           streaming: Bool = false) -> Int32 {
        guard let bytes = encodeResponse(wsi, response, includeBody: includeBody, close: close, length: !streaming)
        else { return -1 }
        httpResponses[wsi] = PendingHTTPResponse(bytes: bytes, closeAfter: close, streaming: streaming)
        lws_callback_on_writable(wsi)
        return 0
    }

    func httpWriteable(_ wsi: OpaquePointer) -> Int32 {
        guard let pending = httpResponses[wsi] else { return 0 }
        let remaining = pending.bytes.count - pending.offset
        if remaining == 0 {
            // A streamed body: more is coming, or it is over (its end is the close).
            if pending.streaming { return 0 }
            httpResponses[wsi] = nil
            return -1
        }
        let n = min(remaining, LwsContextStorage.httpChunk)
        let last = n == remaining && !pending.streaming
        let pre = steno_lws_pre
        pending.bytes.withUnsafeBytes { src in
            (storage.httpScratch + pre).copyMemory(from: src.baseAddress! + pending.offset, byteCount: n)
        }
        let written = lws_write(wsi, (storage.httpScratch + pre).assumingMemoryBound(to: UInt8.self), n,
                                last ? LWS_WRITE_HTTP_FINAL : LWS_WRITE_HTTP)
        if written < n { return -1 }
        pending.offset += n
        if pending.offset > 1 << 20 {
            pending.bytes.removeFirst(pending.offset)
            pending.offset = 0
        }
        if !last {
            if pending.offset < pending.bytes.count || !pending.streaming { lws_callback_on_writable(wsi) }
            return 0
        }
        httpResponses[wsi] = nil
        if pending.closeAfter { return -1 }
        // Ready for the next request on a keep-alive connection, or close.
        return lws_http_transaction_completed(wsi) != 0 ? -1 : 0
    }

    /// Status line and headers (made by lws, which knows the request's HTTP
    /// version and adds the `Server` header), then the body.
    /// `beforeUpgrade`: the answer to a WebSocket handshake, written in HTTP_CONFIRM_UPGRADE.
    func encodeResponse(_ wsi: OpaquePointer, _ response: HTTPResponse, includeBody: Bool, close: Bool,
                        beforeUpgrade: Bool = false, length: Bool = true) -> [UInt8]? {
        var fields: [(String, String)] = [("content-type:", response.contentType)]
        if length { fields.append(("content-length:", String(response.body.count))) }
        for h in response.headers {
            fields.append((Self.headerToken(h.name) + ":", Self.headerValue(h.value)))
        }
        if close { fields.append(("connection:", "close")) }
        let capacity = 512 + fields.reduce(0) { $0 + $1.0.utf8.count + $1.1.utf8.count + 4 }
        var header = [UInt8](repeating: 0, count: capacity)
        let length: Int? = header.withUnsafeMutableBufferPointer { buf -> Int? in
            let start = buf.baseAddress!
            let end = start + buf.count
            var p: UnsafeMutablePointer<UInt8>? = start
            let status = UInt32(clamping: max(100, min(999, response.status)))
            if lws_add_http_header_status(wsi, status, &p, end) != 0 { return nil }
            for (name, value) in fields {
                let failed = name.withCString { n in
                    value.withCString { v in
                        lws_add_http_header_by_name(wsi, UnsafeRawPointer(n).assumingMemoryBound(to: UInt8.self),
                                                    UnsafeRawPointer(v).assumingMemoryBound(to: UInt8.self),
                                                    Int32(value.utf8.count), &p, end) != 0
                    }
                }
                if failed { return nil }
            }
            if lws_finalize_http_header(wsi, &p, end) != 0 { return nil }
            guard let p else { return nil }
            return p - start
        }
        guard let length else { return nil }
        header.removeSubrange(length...)
        Self.completeStatusLine(&header, status: response.status, http11: beforeUpgrade)
        if includeBody { header.append(contentsOf: response.body) }
        return header
    }

    /// Reason phrases of the statuses Steno answers that lws 4.1.6 has none for: its table
    /// stops at 417 (lib/roles/http/header.c), and it writes an empty phrase (`HTTP/1.1 431 `).
    static let reasonPhrases: [Int: String] = [
        421: "Misdirected Request", 422: "Unprocessable Content", 426: "Upgrade Required",
        428: "Precondition Required", 429: "Too Many Requests", 431: "Request Header Fields Too Large",
        451: "Unavailable For Legal Reasons",
    ]

    /// Completes the status line lws wrote (`HTTP/1.x NNN phrase`, the head's first line):
    /// the reason phrase when lws left it empty, and, with `http11`, the version. lws takes the
    /// version from the request, which it records only for requests it serves as HTTP; in
    /// HTTP_CONFIRM_UPGRADE it has not, and writes `HTTP/1.0` whatever the request said. A
    /// server answers with the highest 1.x version it speaks (RFC 9110 §6.2): a handshake that
    /// came as HTTP/1.0 is refused in HTTP/1.1 too.
    static func completeStatusLine(_ head: inout [UInt8], status: Int, http11: Bool) {
        let prefix = Array("HTTP/1.".utf8)
        guard head.count > 12, Array(head[0..<prefix.count]) == prefix else { return }
        if http11 { head[prefix.count] = UInt8(ascii: "1") }
        // "HTTP/1.x NNN " then CRLF: the phrase is empty.
        let phraseAt = 13
        guard head.count >= phraseAt + 2, head[phraseAt] == 0x0d, head[phraseAt + 1] == 0x0a,
              let phrase = reasonPhrases[status] else { return }
        head.insert(contentsOf: Array(phrase.utf8), at: phraseAt)
    }

    /// A header name reduced to token characters (no injection of other fields).
    static func headerToken(_ name: String) -> String {
        String(name.lowercased().unicodeScalars.filter { c in
            c.isASCII && (c.properties.isAlphabetic || ("0"..."9").contains(c) || "-_.!#$%&'*+^`|~".unicodeScalars.contains(c))
        }.map(Character.init))
    }

    /// A header value without control characters (no CR/LF injection).
    static func headerValue(_ value: String) -> String {
        String(value.unicodeScalars.filter { $0.value >= 0x20 && $0.value != 0x7f }.map(Character.init))
    }

    // MARK: - Request details

    func headerValue(_ wsi: OpaquePointer, _ token: lws_token_indexes) -> String? {
        let total = Int(lws_hdr_total_length(wsi, token))
        guard total > 0 else { return nil }
        var buffer = [CChar](repeating: 0, count: total + 1)
        let n = lws_hdr_copy(wsi, &buffer, Int32(buffer.count), token)
        guard n >= 0 else { return nil }
        return String(decoding: buffer[0..<Int(n)].map { UInt8(bitPattern: $0) }, as: UTF8.self)
    }

    func uriPath(_ wsi: OpaquePointer) -> String? {
        headerValue(wsi, WSI_TOKEN_GET_URI)
    }

    func requestHeaders(_ wsi: OpaquePointer) -> HTTPHeaders {
        var headers = HTTPHeaders()
        let wanted: [(String, lws_token_indexes)] = [
            ("authorization", WSI_TOKEN_HTTP_AUTHORIZATION),
            ("origin", WSI_TOKEN_ORIGIN),
            ("host", WSI_TOKEN_HOST),
            ("user-agent", WSI_TOKEN_HTTP_USER_AGENT),
            ("sec-websocket-protocol", WSI_TOKEN_PROTOCOL),
            ("x-forwarded-for", WSI_TOKEN_X_FORWARDED_FOR),
            ("content-type", WSI_TOKEN_HTTP_CONTENT_TYPE),
        ]
        for (name, token) in wanted {
            if let v = headerValue(wsi, token) { headers.add(name, v) }
        }
        return headers
    }

    /// Query parameters: lws splits them at `&` and percent-decodes each.
    func queryItems(_ wsi: OpaquePointer) -> [QueryItem] {
        let total = Int(lws_hdr_total_length(wsi, WSI_TOKEN_HTTP_URI_ARGS))
        guard total > 0 else { return [] }
        var buffer = [CChar](repeating: 0, count: total + 1)
        var items: [QueryItem] = []
        var index: Int32 = 0
        while index < 256 {
            let n = lws_hdr_copy_fragment(wsi, &buffer, Int32(buffer.count), WSI_TOKEN_HTTP_URI_ARGS, index)
            if n < 0 { break }
            index += 1
            let text = String(decoding: buffer[0..<Int(n)].map { UInt8(bitPattern: $0) }, as: UTF8.self)
            if text.isEmpty { continue }
            if let eq = text.firstIndex(of: "=") {
                items.append(QueryItem(name: String(text[..<eq]), value: String(text[text.index(after: eq)...])))
            } else {
                items.append(QueryItem(name: text, value: ""))
            }
        }
        return items
    }

    func peerAddress(_ wsi: OpaquePointer) -> String {
        Self.address { lws_get_peer_simple(wsi, $0, $1) }
    }
}
