import Testing
@testable import StenoServer

/// `X-Forwarded-For` names the client only when a trusted proxy sent it, and only its last
/// entry (the one that proxy appended) counts.
@Suite struct ClientAddressTests {
    let trusting = ClientAddress(trustedProxies: ["10.0.0.2", "FD00::2"])

    @Test func theHeaderOfATrustedProxyNamesTheClient() {
        #expect(trusting.describe(peer: "10.0.0.2", forwardedFor: "203.0.113.7") == "203.0.113.7 via 10.0.0.2")
        // What the client sent itself comes first; the proxy's own entry is the last.
        #expect(trusting.describe(peer: "10.0.0.2", forwardedFor: "6.6.6.6, 203.0.113.7") == "203.0.113.7 via 10.0.0.2")
        #expect(trusting.describe(peer: "10.0.0.2", forwardedFor: "6.6.6.6,203.0.113.7") == "203.0.113.7 via 10.0.0.2")
        #expect(trusting.client(peer: "fd00::2", forwardedFor: "2001:DB8::1") == "2001:db8::1")
        // A dual-stack socket shows an IPv4 peer as IPv4-mapped IPv6.
        #expect(trusting.client(peer: "::ffff:10.0.0.2", forwardedFor: "203.0.113.7") == "203.0.113.7")
    }

    @Test func anyoneElsesHeaderIsIgnored() {
        #expect(trusting.describe(peer: "198.51.100.9", forwardedFor: "203.0.113.7") == "198.51.100.9")
        #expect(trusting.describe(peer: "10.0.0.2", forwardedFor: nil) == "10.0.0.2")
        let trustingNobody = ClientAddress(trustedProxies: [])
        #expect(trustingNobody.describe(peer: "10.0.0.2", forwardedFor: "203.0.113.7") == "10.0.0.2")
    }

    @Test func aLastEntryThatIsNoAddressIsIgnored() {
        for header in ["", " , ", "203.0.113.7, <script>", "unknown", "203.0.113.7\ninfo forged log line",
                       String(repeating: "1", count: 100)] {
            #expect(trusting.client(peer: "10.0.0.2", forwardedFor: header) == nil, "\(header)")
        }
    }
}
