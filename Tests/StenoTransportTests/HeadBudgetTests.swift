import Foundation
import StenoCore
import Testing
@testable import StenoTransport
import StenoTestSupport

/// Connections that have not sent a whole first request head, bounded per address and in all
/// (slowloris): the bookkeeping in memory, then a real transport refusing past each limit.
@Suite struct HeadBudgetTests {
    private static func connection(_ n: Int) -> OpaquePointer { OpaquePointer(bitPattern: n)! }

    /// A socket accepted and, if admitted, adopted as connection `n`.
    private static func accept(_ budget: inout HeadBudget, _ n: Int, from address: String) -> HeadBudget.Refusal? {
        let refusal = budget.admit(socket: Int32(n), from: address)
        if refusal == nil { budget.adopted(socket: Int32(n), as: connection(n)) }
        return refusal
    }

    @Test func anAddressPastItsLimitIsRefusedUntilOneOfItsHeadsFinishes() {
        var budget = HeadBudget(perAddress: 2, total: 0, exempt: [])
        #expect(Self.accept(&budget, 1, from: "10.0.0.1") == nil)
        #expect(Self.accept(&budget, 2, from: "::ffff:10.0.0.1") == nil)
        #expect(Self.accept(&budget, 3, from: "10.0.0.1") == .addressLimit)
        #expect(Self.accept(&budget, 4, from: "10.0.0.2") == nil)
        budget.finished(Self.connection(1))
        budget.finished(Self.connection(1))  // twice: counted once
        budget.finished(Self.connection(3))  // never counted
        #expect(Self.accept(&budget, 5, from: "10.0.0.1") == nil)
        #expect(Self.accept(&budget, 6, from: "10.0.0.1") == .addressLimit)
        #expect(budget.count == 3)
    }

    @Test func theTotalBoundsEveryAddressButExemptOnes() {
        var budget = HeadBudget(perAddress: 1, total: 2, exempt: ["10.0.0.9"])
        #expect(Self.accept(&budget, 1, from: "10.0.0.1") == nil)
        #expect(Self.accept(&budget, 2, from: "10.0.0.2") == nil)
        #expect(Self.accept(&budget, 3, from: "10.0.0.3") == .headBudget)
        #expect(Self.accept(&budget, 4, from: "10.0.0.9") == nil)
        #expect(Self.accept(&budget, 5, from: "10.0.0.9") == nil)
        #expect(budget.count == 2)
        budget.finished(Self.connection(2))
        #expect(Self.accept(&budget, 3, from: "10.0.0.3") == nil)
    }

    @Test func aSocketLwsNeverAdoptedStopsCountingWhenItsDescriptorComesAgain() {
        var budget = HeadBudget(perAddress: 1, total: 0, exempt: [])
        #expect(budget.admit(socket: 7, from: "10.0.0.1") == nil)
        // lws failed it before making a connection of it (closed, never adopted): descriptor
        // 7 is the next accepted socket's.
        #expect(budget.admit(socket: 7, from: "10.0.0.1") == nil)
        #expect(budget.count == 1)
    }

    /// Reads the refusal a connection gets without sending anything.
    private static func refusal(_ stream: TestStream) throws -> TestHTTPResponse {
        var response = try TestHTTPResponse.readHead(from: stream, deadline: Deadline(5))
        try response.readBody(from: stream, deadline: Deadline(5))
        return response
    }

    private static func healthz(_ port: Int, from source: String) throws -> Int {
        let stream = try TestStream.tcp(port: port, source: source)
        defer { stream.close() }
        try stream.write(Array("GET /healthz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n".utf8))
        return try TestHTTPResponse.readHead(from: stream, deadline: Deadline(5)).status
    }

    /// Whether `/healthz` from `source` gets 200 within 2.5 s (the server notices a closed
    /// connection at its next wake-up).
    private static func servedSoon(_ port: Int, from source: String) -> Bool {
        for _ in 0..<50 {
            if (try? healthz(port, from: source)) == 200 { return true }
            Thread.sleep(forTimeInterval: 0.05)
        }
        return false
    }

    @Test func silentConnectionsFromOneAddressPastTheLimitGet429AndOthersAreServed() throws {
        var settings = TestControl.Settings()
        settings.routes["/healthz"] = HTTPResponse(status: 200, text: "ok\n")
        let server = try TestServer(settings) { $0.maxUnfinishedHeadsPerAddress = 3 }
        // Three silent connections (slowloris) hold 127.0.0.2's places.
        let silent = try (0..<3).map { _ in try TestStream.tcp(port: server.port, source: "127.0.0.2") }
        defer { for s in silent { s.close() } }
        // Each is accepted and counted before the next comes: a request through each other
        // address shows the server has served everything that came before it.
        #expect(try Self.healthz(server.port, from: "127.0.0.3") == 200)
        let fourth = try TestStream.tcp(port: server.port, source: "127.0.0.2")
        defer { fourth.close() }
        let refused = try Self.refusal(fourth)
        #expect(refused.status == 429)
        #expect(refused.header("Retry-After") == "1")
        #expect(refused.bodyText == #"{"status":"too_many_connections","retryAfter":1}"#)
        #expect(try fourth.awaitEOF(deadline: Deadline(5)) == 0)
        // Another address is served; and once one silent connection is gone, so is 127.0.0.2.
        #expect(try Self.healthz(server.port, from: "127.0.0.4") == 200)
        silent[0].close()
        #expect(Self.servedSoon(server.port, from: "127.0.0.2"))
        // A connection whose head is complete no longer counts: WebSocket upgrades from the
        // address go through while two silent ones still hold two of its three places.
        let clients = try (0..<3).map { _ in try server.connect(source: "127.0.0.2") }
        #expect(clients.count == 3)
    }

    @Test func pastTheMemoryBudgetNewConnectionsGet503AndATrustedAddressIsNotLimited() throws {
        var settings = TestControl.Settings()
        settings.routes["/healthz"] = HTTPResponse(status: 200, text: "ok\n")
        let server = try TestServer(settings) { config in
            config.maxUnfinishedHeadsPerAddress = 2
            config.unfinishedHeadsMemory = 3 * config.headBufferBytes
            config.unlimitedAddresses.append("127.0.0.5")
        }
        // The proxy's address holds silent connections past the address limit, uncounted.
        let proxy = try (0..<4).map { _ in try TestStream.tcp(port: server.port, source: "127.0.0.5") }
        defer { for s in proxy { s.close() } }
        let first = try (0..<2).map { _ in try TestStream.tcp(port: server.port, source: "127.0.0.6") }
        defer { for s in first { s.close() } }
        let other = try TestStream.tcp(port: server.port, source: "127.0.0.9")
        // Three unfinished heads in all (the kernel hands connections over in the order they
        // came): the budget's. The next connection from anywhere else gets 503.
        let past = try TestStream.tcp(port: server.port, source: "127.0.0.8")
        defer { past.close() }
        let refused = try Self.refusal(past)
        #expect(refused.status == 503)
        #expect(refused.bodyText == #"{"status":"busy","retryAfter":1}"#)
        #expect(try Self.healthz(server.port, from: "127.0.0.5") == 200)
        // Once one of them is gone, the next is served.
        other.close()
        #expect(Self.servedSoon(server.port, from: "127.0.0.7"))
    }
}
