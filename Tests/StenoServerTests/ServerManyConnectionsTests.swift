import Foundation
import StenoCore
import StenoSystem
import StenoTestSupport
import Testing

@testable import StenoServer

/// Many connections at once on the default event loop (issue 15). Lean on purpose: the
/// figures for thousands are `steno-bench connections`; this checks that every connection of
/// a few hundred is served and ends cleanly, whichever side closes.
@Suite struct ServerManyConnectionsTests {
    @Test func threeHundredSilentSessionsAreServedAndCloseCleanly() throws {
        // Client and server are one process here: two descriptors per connection.
        OpenFileLimit.raise()
        let count = 300
        let server = try LiveServer { $0.maxSessions = count + 10 }
        var clients: [StenoClient] = []
        for _ in 0..<count {
            let client = try server.connect()
            try client.send(StartMessage.text(AudioFormat.pcm(16000)))
            clients.append(client)
        }
        for (i, client) in clients.enumerated() {
            #expect((try? client.waitFor("ready", timeout: 60)) != nil, "session \(i) got no ready")
        }
        #expect(try server.metrics()["steno_sessions_active"] == Double(count))

        // Half end their session (the server closes with 1000 after `ended`), half close
        // their connection themselves (the server answers the close frame).
        for (i, client) in clients.enumerated() where i % 2 == 0 { try client.send(#"{"type":"end"}"#) }
        for (i, client) in clients.enumerated() {
            if i % 2 == 0 {
                try client.readUntilClose(timeout: 60)
                #expect(client.events.last?.type == "ended", "session \(i): \(client.events.map(\.type))")
                #expect(client.closeCode == 1000, "session \(i): close \(client.closeCode.map(String.init) ?? "none")")
            } else {
                let (_, close) = try client.ws.close(code: 1000)
                #expect(close == .close(code: 1000, reason: ""), "session \(i): \(close.map(\.description) ?? "no close frame")")
            }
        }
        #expect(eventually { (try? server.metrics()["steno_sessions_active"]) == 0 })
        #expect(eventually { server.server.sessionCount == 0 })
    }
}
