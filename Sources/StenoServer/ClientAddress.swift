import StenoTransport

/// Who a connection comes from, for the log: its peer, or, when the peer is a proxy the server
/// was told to trust (`--trusted-proxy`), the client address that proxy put in
/// `X-Forwarded-For`.
///
/// Only the last address of the header counts: a proxy appends the address it saw, so what
/// comes before it is whatever the client chose to send. A header from a peer that is not a
/// trusted proxy is ignored, as is one whose last entry is not an IP address (nothing from it
/// reaches the log).
public struct ClientAddress: Sendable, Equatable {
    public let trustedProxies: Set<String>

    public init(trustedProxies: [String]) {
        self.trustedProxies = Set(trustedProxies.map(PeerAddress.normalized))
    }

    /// The client's address as the log writes it: `ADDRESS`, or `ADDRESS via PROXY` when a
    /// trusted proxy forwarded it.
    public func describe(peer: String, forwardedFor: String?) -> String {
        guard let client = client(peer: peer, forwardedFor: forwardedFor) else { return peer }
        return "\(client) via \(peer)"
    }

    /// The forwarded client address, when `peer` is trusted and the header names one.
    public func client(peer: String, forwardedFor: String?) -> String? {
        guard !trustedProxies.isEmpty, let forwardedFor, trustedProxies.contains(PeerAddress.normalized(peer)) else { return nil }
        // lws joins repeated header lines with commas, so the last entry is the nearest proxy's.
        guard let last = forwardedFor.split(separator: ",").last.map(Self.trimmed), Self.looksLikeAddress(last) else {
            return nil
        }
        return PeerAddress.normalized(String(last))
    }

    private static func trimmed(_ text: Substring) -> Substring {
        var s = text
        while let f = s.first, f == " " || f == "\t" { s = s.dropFirst() }
        while let l = s.last, l == " " || l == "\t" { s = s.dropLast() }
        return s
    }

    /// An IPv4 or IPv6 address's characters, and short enough to be one.
    static func looksLikeAddress<S: StringProtocol>(_ text: S) -> Bool {
        !text.isEmpty && text.count <= 45 && text.allSatisfy { $0.isHexDigit || $0 == "." || $0 == ":" }
    }
}
