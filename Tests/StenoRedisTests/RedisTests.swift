import CHiredis
import Foundation
import StenoTestSupport
import Testing
@testable import StenoRedis

/// hiredis's replies as RESPValues: every kind, read by a hiredis reader as the connection's is.
@Suite struct RESPReplyTests {
    static let replies: [(String, RESPValue)] = [
        ("+OK\r\n", .simple("OK")),
        ("-WRONGTYPE Operation against a key holding the wrong kind of value\r\n",
         .error("WRONGTYPE Operation against a key holding the wrong kind of value")),
        (":-42\r\n", .integer(-42)),
        ("$5\r\nhe\r\no\r\n", .bulk(Array("he\r\no".utf8))),
        ("$0\r\n\r\n", .bulk([])),
        ("$-1\r\n", .bulk(nil)),
        ("*-1\r\n", .array(nil)),
        ("*0\r\n", .array([])),
        ("*2\r\n*2\r\n$3\r\n1-0\r\n*2\r\n$1\r\nk\r\n$1\r\nv\r\n:7\r\n",
         .array([.array([.bulk(Array("1-0".utf8)), .array([.bulk([107]), .bulk([118])])]), .integer(7)])),
        ("*3\r\n$-1\r\n*-1\r\n*1\r\n$-1\r\n", .array([.bulk(nil), .array(nil), .array([.bulk(nil)])])),
    ]

    /// The replies in `wire`, fed to a reader in pieces of `piece` bytes.
    static func read(_ wire: String, piece: Int) -> [RESPValue] {
        let reader = redisReaderCreate()!
        defer { redisReaderFree(reader) }
        let marking = NullArrayMarking(on: reader)
        defer { withExtendedLifetime(marking) {} }
        var values: [RESPValue] = []
        let bytes = Array(wire.utf8)
        for start in stride(from: 0, to: bytes.count, by: piece) {
            let chunk = bytes[start..<min(start + piece, bytes.count)]
            let fed = chunk.withUnsafeBufferPointer {
                $0.withMemoryRebound(to: CChar.self) { redisReaderFeed(reader, $0.baseAddress, $0.count) }
            }
            #expect(fed == REDIS_OK)
            var reply: UnsafeMutableRawPointer?
            while redisReaderGetReply(reader, &reply) == REDIS_OK, let got = reply {
                values.append(RESPValue(got.assumingMemoryBound(to: redisReply.self)))
                freeReplyObject(got)
                reply = nil
            }
        }
        return values
    }

    @Test func everyKindOfReplyWholeAndByteByByte() {
        for (wire, expected) in Self.replies {
            #expect(Self.read(wire, piece: wire.utf8.count) == [expected], "\(wire)")
            #expect(Self.read(wire, piece: 1) == [expected], "\(wire)")
        }
        #expect(Self.read(Self.replies.map(\.0).joined(), piece: 7) == Self.replies.map(\.1))
    }
}

@Suite struct RedisURLTests {
    @Test func goodURLs() throws {
        #expect(try RedisURL.parse("redis://10.0.0.5").get() == RedisURL(host: "10.0.0.5"))
        #expect(try RedisURL.parse("redis://cache.internal:6380/2").get() == RedisURL(host: "cache.internal", port: 6380, database: 2))
        #expect(try RedisURL.parse("redis://[::1]:7000").get() == RedisURL(host: "::1", port: 7000))
        #expect(try RedisURL.parse("redis://:s3cret@h:1").get() == RedisURL(host: "h", port: 1, password: "s3cret"))
        #expect(try RedisURL.parse("redis://steno:pw@h").get() == RedisURL(host: "h", user: "steno", password: "pw"))
        #expect(RedisURL(host: "::1", port: 7000).description == "redis://[::1]:7000")
    }

    @Test func badURLs() {
        for text in ["", "10.0.0.5:6379", "http://h:1", "redis://", "redis://h:0", "redis://h:70000", "redis://h:x",
                     "redis://h/x", "redis://[::1", "redis://[::1]x", "redis://a b:1"] {
            if case .success(let url) = RedisURL.parse(text) { Issue.record("\(text) parsed as \(url)") }
        }
    }
}

/// Against Debian's redis-server on a loopback port.
@Suite(.serialized, .enabled(if: TestRedisServer.isInstalled, "\(TestRedisServer.missing)"))
struct RedisConnectionTests {
    @Test func commandsPipelinesAndErrorReplies() throws {
        let server = try TestRedisServer()
        defer { server.remove() }
        let url = try RedisURL.parse(server.url).get()
        let redis = try RedisConnection(url)
        #expect(try redis.command(["SET", "k", "v\r\né"]) == .simple("OK"))
        #expect(try redis.command(["GET", "k"]).text == "v\r\né")
        #expect(try redis.command(["GET", "missing"]) == .bulk(nil))
        #expect(try redis.command(["SET", "lease", "a", "NX", "PX", "10000"]) == .simple("OK"))
        #expect(try redis.command(["SET", "lease", "b", "NX", "PX", "10000"]) == .bulk(nil))
        #expect(throws: RedisError.server("ERR unknown command 'NOSUCH', with args beginning with: ")) {
            try redis.command(["NOSUCH"])
        }
        // A pipeline goes on past an error reply, and the connection stays usable.
        let replies = try redis.pipeline([["INCR", "n"], ["LPUSH", "k", "x"], ["INCR", "n"]].map { $0.map { Array($0.utf8) } })
        #expect(replies[0] == .integer(1) && replies[2] == .integer(2))
        if case .error(let message) = replies[1] { #expect(message.hasPrefix("WRONGTYPE")) } else { Issue.record("\(replies)") }
        // A big value in many reads.
        let big = String(repeating: "0123456789", count: 100_000)
        try redis.command(["SET", "big", big])
        #expect(try redis.command(["GET", "big"]).text == big)
    }

    @Test func streamsAndBlockingReads() throws {
        let server = try TestRedisServer()
        defer { server.remove() }
        let url = try RedisURL.parse(server.url).get()
        let writer = try RedisConnection(url)
        let reader = try RedisConnection(url)
        // Nothing yet: the blocking read gives up after its time, with a null array.
        #expect(try reader.command(["XREAD", "BLOCK", "100", "STREAMS", "s", "0-0"], extraWait: 0.1) == .array(nil))
        let first = try writer.command(["XADD", "s", "MAXLEN", "~", "1000", "*", "k", "final", "d", "{}"]).text
        #expect(first != nil)
        let read = try reader.command(["XREAD", "BLOCK", "1000", "STREAMS", "s", "0-0"], extraWait: 1)
        let entries = read.elements?.first?.elements?[1].elements
        #expect(entries?.count == 1)
        #expect(entries?.first?.elements?[0].text == first)
        #expect(entries?.first?.elements?[1] == .array([.bulk(Array("k".utf8)), .bulk(Array("final".utf8)),
                                                         .bulk(Array("d".utf8)), .bulk(Array("{}".utf8))]))
    }

    /// A blocking read is given its own time on top of the timeout; without it, a server that
    /// does not answer within the timeout is given up, and the connection closed.
    @Test func timeouts() throws {
        let server = try TestRedisServer()
        defer { server.remove() }
        let redis = try RedisConnection(try RedisURL.parse(server.url).get(), timeout: 0.3)
        let read = ["XREAD", "BLOCK", "600", "STREAMS", "s", "0-0"]
        #expect(try redis.command(read, extraWait: 0.6) == .array(nil))
        let start = Date()
        #expect(throws: RedisError.connection("no answer within 0.3 s")) { try redis.command(read) }
        #expect(Date().timeIntervalSince(start) > 0.25 && Date().timeIntervalSince(start) < 0.6)
        #expect(!redis.isOpen)
    }

    /// An IPv6 address, written in brackets in the URL (where this machine has IPv6 loopback).
    @Test func anIPv6Address() throws {
        let interfaces = (try? String(contentsOfFile: "/proc/net/if_inet6", encoding: .utf8)) ?? ""
        guard interfaces.contains("00000000000000000000000000000001") else { return }
        let server = try TestRedisServer()
        defer { server.remove() }
        let redis = try RedisConnection(try RedisURL.parse("redis://[::1]:\(server.port)").get())
        #expect(try redis.command(["PING"]) == .simple("PONG"))
    }

    @Test func aServerThatIsGoneOrGoesAwayIsAConnectionError() throws {
        let server = try TestRedisServer()
        defer { server.remove() }
        let url = try RedisURL.parse(server.url).get()
        let redis = try RedisConnection(url)
        try redis.command(["PING"])
        server.stop()
        #expect(throws: RedisError.self) { try redis.command(["PING"]) }
        #expect(!redis.isOpen)
        do {
            _ = try RedisConnection(url, timeout: 0.5)
            Issue.record("connected to a stopped server")
        } catch {
            guard case .connection = error else { Issue.record("\(error)"); return }
        }
        // Back on the same port: a new connection works.
        try server.start()
        #expect(try RedisConnection(url).command(["PING"]) == .simple("PONG"))
    }
}
