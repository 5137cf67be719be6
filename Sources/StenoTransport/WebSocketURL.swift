/// Where a WebSocket client connects: `ws://host:port/path?query` or `wss://…`.
public struct WebSocketURL: Sendable, Equatable, CustomStringConvertible {
    /// `wss`: TLS.
    public var secure: Bool
    /// Host name or IP address, without brackets (`::1`).
    public var host: String
    public var port: Int
    /// Path and query, starting with `/`.
    public var path: String

    public init(secure: Bool, host: String, port: Int, path: String = "/") {
        self.secure = secure
        self.host = host
        self.port = port
        self.path = path.hasPrefix("/") ? path : "/" + path
    }

    /// Parses `ws://HOST[:PORT][/PATH]` or `wss://…` (an IPv6 address in brackets); nil for
    /// anything else. The port defaults to 80 (ws) or 443 (wss).
    public init?(_ text: String) {
        let secure: Bool
        let rest: Substring
        if text.lowercased().hasPrefix("ws://") {
            secure = false
            rest = text.dropFirst(5)
        } else if text.lowercased().hasPrefix("wss://") {
            secure = true
            rest = text.dropFirst(6)
        } else {
            return nil
        }
        let authorityEnd = rest.firstIndex(where: { $0 == "/" || $0 == "?" || $0 == "#" }) ?? rest.endIndex
        let authority = rest[..<authorityEnd]
        var path = String(rest[authorityEnd...])
        if let hash = path.firstIndex(of: "#") { path = String(path[..<hash]) }
        if path.isEmpty || path.hasPrefix("?") { path = "/" + path }
        guard !authority.isEmpty, !authority.contains("@"), !authority.contains(where: \.isWhitespace) else { return nil }
        var host: Substring
        var portText: Substring?
        if authority.hasPrefix("[") {
            guard let close = authority.firstIndex(of: "]") else { return nil }
            host = authority[authority.index(after: authority.startIndex)..<close]
            let after = authority[authority.index(after: close)...]
            if !after.isEmpty {
                guard after.hasPrefix(":") else { return nil }
                portText = after.dropFirst()
            }
        } else if let colon = authority.lastIndex(of: ":") {
            host = authority[..<colon]
            portText = authority[authority.index(after: colon)...]
            if host.contains(":") { return nil }  // an IPv6 address needs brackets
        } else {
            host = authority
        }
        guard !host.isEmpty else { return nil }
        var port = secure ? 443 : 80
        if let portText {
            guard !portText.isEmpty, portText.allSatisfy({ $0.isASCII && $0.isNumber }),
                  let number = Int(portText), (1...65535).contains(number) else { return nil }
            port = number
        }
        self.init(secure: secure, host: String(host), port: port, path: path)
    }

    /// The same server at another path (and query).
    public func with(path: String) -> WebSocketURL {
        WebSocketURL(secure: secure, host: host, port: port, path: path)
    }

    /// The `Host` header: `host:port`, the port left out when it is the scheme's own.
    public var hostHeader: String {
        let name = host.contains(":") ? "[\(host)]" : host
        return port == (secure ? 443 : 80) ? name : "\(name):\(port)"
    }

    public var description: String { (secure ? "wss://" : "ws://") + hostHeader + path }
}
