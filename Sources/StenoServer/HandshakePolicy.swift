import StenoTransport

/// The checks an upgrade request passes before any session exists, in the order
/// the protocol answers them: unknown path (404), missing or wrong token (401),
/// origin not allowed (403), no capacity (503 + `Retry-After`).
///
/// A helper for the delegate's `decideUpgrade`; the delegate knows its own
/// capacity and passes it in.
public struct HandshakePolicy: Sendable {
    /// Paths that accept upgrades, e.g. `/v1/stream`, `/v1/listen`.
    public var paths: Set<String>
    /// Accepted tokens; empty means no authentication.
    public var tokens: Set<String>
    /// Tokens accepted only on `viewerPaths` (read-only access); they count only when
    /// `tokens` is not empty.
    public var viewerTokens: Set<String>
    /// Paths where `viewerTokens` are accepted too, e.g. `/v1/listen`.
    public var viewerPaths: Set<String>
    /// Allowed `Origin` values (e.g. `https://captions.example`); nil allows any.
    /// A request without `Origin` (not a browser) is allowed.
    public var allowedOrigins: Set<String>?
    /// `Retry-After` seconds sent with a 503 at capacity.
    public var retryAfterSeconds: Int

    public init(paths: Set<String>, tokens: Set<String> = [], viewerTokens: Set<String> = [], viewerPaths: Set<String> = [],
                allowedOrigins: Set<String>? = nil, retryAfterSeconds: Int = 5) {
        self.paths = paths
        self.tokens = tokens
        self.viewerTokens = viewerTokens
        self.viewerPaths = viewerPaths
        self.allowedOrigins = allowedOrigins
        self.retryAfterSeconds = retryAfterSeconds
    }

    /// The decision for `request`; `hasCapacity` says whether one more connection
    /// of this kind fits.
    public func evaluate(_ request: UpgradeRequest, hasCapacity: Bool) -> UpgradeDecision {
        guard paths.contains(request.path) else { return .reject(status: 404) }
        if !tokens.isEmpty && !isAuthorized(request, readOnly: viewerPaths.contains(request.path)) {
            return .reject(status: 401, headers: [("WWW-Authenticate", "Bearer")])
        }
        if let allowed = allowedOrigins, let origin = request.headers["origin"], !allowed.contains(origin) {
            return .reject(status: 403)
        }
        guard hasCapacity else {
            return .reject(status: 503, headers: [("Retry-After", String(retryAfterSeconds))])
        }
        return .accept
    }

    /// Whether the request carries an accepted token, as `Authorization: Bearer T` (or
    /// `Token T`, as Deepgram's clients send it), as `Sec-WebSocket-Protocol: token, T` (a
    /// browser's Deepgram client, which cannot set headers) or as `?token=T`.
    /// `readOnly`: a viewer token is good enough too.
    public func isAuthorized(_ request: UpgradeRequest, readOnly: Bool = false) -> Bool {
        isAuthorized(headers: request.headers, query: request.query, readOnly: readOnly)
    }

    /// The same for a plain HTTP request (the channels' caption files).
    public func isAuthorized(headers: HTTPHeaders, query: [QueryItem], readOnly: Bool = false) -> Bool {
        if let header = headers["authorization"] {
            let parts = header.split(separator: " ", maxSplits: 1, omittingEmptySubsequences: true)
            if parts.count == 2, ["bearer", "token"].contains(parts[0].lowercased()),
               matches(String(parts[1]).trimmingSpaces, readOnly: readOnly) { return true }
        }
        if let offered = headers["sec-websocket-protocol"] {
            let parts = offered.split(separator: ",").map { String($0).trimmingSpaces }
            if parts.count == 2, parts[0].lowercased() == "token", matches(parts[1], readOnly: readOnly) { return true }
        }
        for item in query where item.name == "token" {
            if matches(item.value, readOnly: readOnly) { return true }
        }
        return false
    }

    private func matches(_ candidate: String, readOnly: Bool) -> Bool {
        // Compare against every token without stopping early, so the time taken
        // does not tell how much of a token was right.
        var found = false
        let accepted = readOnly ? tokens.union(viewerTokens) : tokens
        for token in accepted where constantTimeEqual(Array(token.utf8), Array(candidate.utf8)) {
            found = true
        }
        return found
    }
}

private func constantTimeEqual(_ a: [UInt8], _ b: [UInt8]) -> Bool {
    var diff = UInt8(truncatingIfNeeded: a.count ^ b.count)
    let n = max(a.count, b.count)
    for i in 0..<n {
        let x = i < a.count ? a[i] : 0
        let y = i < b.count ? b[i] : 0
        diff |= x ^ y
    }
    return diff == 0 && a.count == b.count
}

extension String {
    fileprivate var trimmingSpaces: String {
        var s = Substring(self)
        while s.first == " " || s.first == "\t" { s = s.dropFirst() }
        while s.last == " " || s.last == "\t" { s = s.dropLast() }
        return String(s)
    }
}
