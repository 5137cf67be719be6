import Foundation
import StenoCore
import Testing
@testable import StenoServer

#if canImport(Glibc)
import Glibc
import StenoTestSupport
#endif

/// `--write-stall-seconds` (issue 12): a connection that takes no byte while its events wait is
/// closed as a slow consumer (4008) long before its outbound queue would fill, and counted.
/// The clients here never read (a viewer whose phone stopped reading but whose TCP stack still
/// acknowledges: to the server, data waits and nothing is written); the queue limit is set
/// far out of reach, so only the stall can close them.
@Suite struct WriteStallTests {
    /// Sends `count` small text frames that each get a non-fatal `bad_message` back (about
    /// 110 bytes), in one go: megabytes of answers for a client that reads none of them.
    static func flood(_ c: WebSocketTestClient, count: Int) throws {
        var bytes: [UInt8] = []
        bytes.reserveCapacity(count * 7)
        for _ in 0..<count { bytes += WebSocketTestClient.encodeFrame(opcodeValue: 1, Array("x".utf8)) }
        try c.sendRaw(bytes, timeout: 120)
    }

    /// Reads what the server had written, to its end: the close frame if it got out (its code),
    /// or nil if the connection was cut first. Every message before it is a `bad_message`.
    static func drain(_ c: WebSocketTestClient) throws -> (close: UInt16??, messages: Int, others: [String]) {
        var messages = 0
        var others: [String] = []
        while true {
            let m: WebSocketTestClient.Message
            do {
                m = try c.receive(timeout: 60)
            } catch TestClientError.closed {
                return (nil, messages, others)
            }
            switch m {
            case .close(let code, _): return (.some(code), messages, others)
            case .text(let t):
                messages += 1
                if !t.contains(#""code":"bad_message""#) && others.count < 3 { others.append(t) }
            default: break
            }
        }
    }

    @Test func aViewerAndASessionThatNeverReadAreClosedAsSlowConsumers() throws {
        let server = try LiveServer {
            $0.writeStall = .seconds(1)
            $0.limits.outboundBytes = 512 << 20
            $0.limits.startTimeoutSeconds = 600
        }
        #expect(try server.metrics()["steno_write_stalls_total"] == 0)

        // A viewer; then a session that has not started (its bad messages are answered too).
        let paths = ["/v1/listen?channel=stall", "/v1/stream"]
        for (n, path) in paths.enumerated() {
            let c = try WebSocketTestClient.connect(port: server.port, path: path, receiveBufferSize: 4096, timeout: 10)
            if path.hasPrefix("/v1/listen") { _ = try c.receive(timeout: 10) }  // joined
            // ≈ 9 MB of answers: more than the socket buffers on both sides hold.
            try Self.flood(c, count: 80_000)
            #expect(eventually(timeout: 120) { (try? server.metrics()["steno_write_stalls_total"]) == Double(n + 1) },
                    "\(path): no write stall was counted")
            let (close, messages, others) = try Self.drain(c)
            // The close frame gets out if the client reads within the close's flush deadline
            // (10 s), as here; either way the connection ends, and never with another code.
            if case .some(let code) = close { #expect(code == 4008, "\(path): close \(code.map(String.init) ?? "none")") }
            #expect(messages > 0 && messages < 80_000, "\(path): \(messages) answers before the end")
            #expect(others.isEmpty, "\(path): \(others)")
            c.disconnect()
        }
        let metrics = try server.metrics()
        #expect(metrics[#"steno_errors_total{code="slow_consumer"}"#] ?? 0 >= 1)
        #expect(metrics[#"steno_channel_viewers_dropped_total{channel="stall"}"#] == 1)
        #expect(eventually { server.server.sessionCount == 0 })
        #expect(eventually { (try? server.metrics()["steno_viewers_active"]) == 0 })

        // A client that reads keeps its connection, however long it is quiet.
        let reader = try server.connect(path: "/v1/listen?channel=quiet")
        _ = try reader.next(timeout: 10)
        usleep(2_500_000)  // past the stall limit twice (not a timing check: nothing may happen)
        try reader.send(#"{"type":"nonsense"}"#)
        #expect(try reader.waitFor("error", timeout: 30).errorCode == "bad_message")
        #expect(try server.metrics()["steno_write_stalls_total"] == 2)
    }
}
