import Foundation
import StenoCore
import StenoRedis
import Testing
@testable import StenoServer
import StenoTestSupport

/// Channels across instances (`--redis`): two real servers in this process sharing a real
/// redis-server on a loopback port, a publisher on one, viewers on both.
@Suite(.serialized, .enabled(if: TestRedisServer.isInstalled, "\(TestRedisServer.missing)"))
struct ServerRedisChannelTests {
    /// `resumeSeconds`: how long sessions are held for a resume (0: they cannot be; `ready` then
    /// gives no token).
    static func servers(_ redis: TestRedisServer, resumeSeconds: Double = 0) throws -> (LiveServer, LiveServer) {
        let url = try RedisURL.parse(redis.url).get()
        func make() throws -> LiveServer { try LiveServer { $0.redis = url; $0.limits.resumeSeconds = resumeSeconds } }
        return (try make(), try make())
    }

    /// Reads `viewer` until the broadcast has ended (`publisher` `ended`).
    static func readToTheEnd(_ viewer: StenoClient) throws {
        while true {
            let event = try viewer.waitFor("publisher", timeout: 120)
            if event.string("state") == "ended" { return }
        }
    }

    @Test func viewersOnBothInstancesGetEveryFinalInOrderAndTheChannelHasOnePublisher() throws {
        let redis = try TestRedisServer()
        defer { redis.remove() }
        let (first, second) = try Self.servers(redis)
        defer { first.stop(); second.stop() }
        let input = TestInput.pcm16k()

        let here = try first.connect(path: "/v1/listen?channel=hall")
        let there = try second.connect(path: "/v1/listen?channel=hall")
        _ = try here.waitFor("joined")
        _ = try there.waitFor("joined")

        let publisher = try first.connect()
        let ready = try publisher.start(input, extra: #""channel":"hall""#)
        // The other instance's viewer learns of the broadcast through Redis, with its id.
        let live = try there.waitFor("publisher")
        #expect(live.string("state") == "live" && live.string("startedAt") == ready.string("startedAt"), "\(live)")

        // Someone on the other instance tries to publish on the channel: refused, as on one.
        let intruder = try second.connect()
        try intruder.start(FormatInputs.pcm24k, extra: #""channel":"hall""#)
        let refused = try intruder.waitFor("error")
        #expect(refused.errorCode == "bad_message" && refused.bool("fatal") == false, "\(refused)")
        try intruder.send(#"{"type":"cancel"}"#)
        try intruder.readUntilClose()

        try publisher.send(audio: input.messages, of: input)
        try publisher.end()
        expectEndedNormally(publisher, audio: input.duration, "the publisher")
        let finals = publisher.events.finals
        #expect(finals.count >= 4)
        try Self.readToTheEnd(here)
        try Self.readToTheEnd(there)
        #expect(here.events.finals == finals)
        #expect(there.events.finals == finals, "\(there.events.types)")
        // Its caption files and HLS segments are served by the other instance too.
        // (The end reaches the other instance's files a moment after its viewer: read until they agree.)
        for path in ["/v1/channels/hall/captions.vtt", "/v1/channels/hall/captions.m3u8"] {
            var a = try first.get(path), b = try second.get(path)
            _ = eventually(timeout: 10) {
                guard a.bodyText != b.bodyText, let x = try? first.get(path), let y = try? second.get(path) else { return true }
                (a, b) = (x, y)
                return a.bodyText == b.bodyText
            }
            #expect(a.status == 200 && b.status == 200 && a.bodyText == b.bodyText, "\(path): \(a.bodyText) vs \(b.bodyText)")
        }
    }

    /// An instance nobody watches the channel on still lists it and serves its files: every
    /// instance follows every channel in Redis, not only the ones with viewers there.
    @Test func anInstanceWithNoViewerOfTheChannelListsItAndServesItsFiles() throws {
        let redis = try TestRedisServer()
        defer { redis.remove() }
        let (first, second) = try Self.servers(redis)
        defer { first.stop(); second.stop() }
        let input = TestInput.pcm16k()
        let publisher = try first.connect()
        try publisher.start(input, extra: #""channel":"lecture""#)
        func listed(on server: LiveServer) throws -> [String: Any]? {
            let body = try server.get("/v1/channels").body
            let list = try JSONSerialization.jsonObject(with: Data(body)) as? [String: Any]
            return (list?["channels"] as? [[String: Any]])?.first { $0["name"] as? String == "lecture" }
        }
        #expect(try eventually(timeout: 30) { try listed(on: second)?["state"] as? String == "live" },
                "the other instance lists the live broadcast")
        try publisher.send(audio: input.messages, of: input)
        try publisher.end()
        expectEndedNormally(publisher, audio: input.duration, "the publisher")
        #expect(publisher.events.finals.count >= 4)
        #expect(try eventually(timeout: 30) { try listed(on: second)?["state"] as? String == "ended" })
        for path in ["/v1/channels/lecture/captions.txt", "/v1/channels/lecture/captions.vtt",
                     "/v1/channels/lecture/captions.m3u8", "/v1/channels/lecture/broadcasts"] {
            let a = try first.get(path), b = try second.get(path)
            #expect(a.status == 200 && b.status == 200 && a.bodyText == b.bodyText, "\(path): \(a.bodyText) vs \(b.bodyText)")
        }
        #expect(try listed(on: second)?["viewers"] as? Int == 0)
    }

    @Test func theLeaseKeepsASecondPublisherOffAChannelNobodyWatchesHere() throws {
        let redis = try TestRedisServer()
        defer { redis.remove() }
        let (first, second) = try Self.servers(redis)
        defer { first.stop(); second.stop() }
        let publisher = try first.connect()
        try publisher.start(TestInput.pcm16k(), extra: #""channel":"lobby""#)
        // The lease is taken (the instance writes the broadcast's first entry after it).
        let direct = try RedisConnection(try RedisURL.parse(redis.url).get())
        #expect(eventually { (try? direct.command(["EXISTS", "steno:lease:lobby"])) == .integer(1) })
        // The second instance has no viewer of the channel, so it knows nothing of it until Redis says.
        let intruder = try second.connect()
        try intruder.start(FormatInputs.pcm24k, extra: #""channel":"lobby""#)
        let refused = try intruder.waitFor("error")
        #expect(refused.errorCode == "bad_message" && refused.bool("fatal") == false, "\(refused)")
        #expect(refused.string("message")?.contains("another instance") == true, "\(refused)")
        try intruder.send(#"{"type":"cancel"}"#)
        try intruder.readUntilClose()
        try publisher.send(#"{"type":"cancel"}"#)
        try publisher.readUntilClose()
    }

    /// A publisher on channel `lobby` of `server`, whose lease is taken: it, its session and
    /// resume token, and the lease's holder as Redis has it now.
    static func publishing(on server: LiveServer, redis: TestRedisServer) throws
        -> (StenoClient, id: String, token: String, holder: () -> String?) {
        let publisher = try server.connect()
        let ready = try publisher.start(TestInput.pcm16k(), extra: #""channel":"lobby""#)
        let id = try #require(ready.string("session")), token = try #require(ready.string("resumeToken"))
        let direct = try RedisConnection(try RedisURL.parse(redis.url).get())
        let holder = { (try? direct.command(["GET", "steno:lease:lobby"]))?.text }
        #expect(eventually { holder()?.hasSuffix("/" + id) == true })
        return (publisher, id, token, holder)
    }

    /// `start`'s fields to publish on `lobby` going on from session `id`.
    static func continuing(_ id: String, token: String) -> String {
        #""channel":"lobby","continues":{"session":"\#(id)","resumeToken":"\#(token)"}"#
    }

    /// A session that `continues` the channel's publisher with that session's resume token takes
    /// its lease over at once (its talker lost it with its instance); with any other token it
    /// waits for the lease like any second publisher, and is refused.
    @Test func aSessionThatContinuesThePublisherTakesItsChannelOverOnlyWithItsToken() throws {
        let redis = try TestRedisServer()
        defer { redis.remove() }
        let (first, second) = try Self.servers(redis, resumeSeconds: 30)
        defer { first.stop(); second.stop() }
        let (publisher, id, token, holder) = try Self.publishing(on: first, redis: redis)

        let impostor = try second.connect()
        try impostor.start(FormatInputs.pcm24k, extra: Self.continuing(id, token: "guess"))
        let refused = try impostor.waitFor("error")
        #expect(refused.string("message")?.contains("another instance") == true, "\(refused)")
        #expect(holder()?.hasSuffix("/" + id) == true)
        try impostor.send(#"{"type":"cancel"}"#)
        try impostor.readUntilClose()

        let talker = try second.connect()
        let again = try talker.start(FormatInputs.pcm24k, extra: Self.continuing(id, token: token))
        let newID = try #require(again.string("session"))
        #expect(eventually(timeout: 5) { holder()?.hasSuffix("/" + newID) == true }, "\(holder() ?? "no lease")")
        try talker.send(#"{"type":"cancel"}"#)
        try talker.readUntilClose()
        try publisher.send(#"{"type":"cancel"}"#)
        try publisher.readUntilClose()
    }

    /// A session on the publisher's own instance that `continues` it (a client that gave up
    /// resuming a session the server still holds) takes nothing over: it is a second local
    /// publisher, refused, and the lease stays the publisher's.
    @Test func aSessionContinuingAPublisherOnItsOwnInstanceTakesNothingOver() throws {
        let redis = try TestRedisServer()
        defer { redis.remove() }
        let (first, second) = try Self.servers(redis, resumeSeconds: 30)
        defer { first.stop(); second.stop() }
        let (publisher, id, token, holder) = try Self.publishing(on: first, redis: redis)
        let again = try first.connect()
        try again.start(FormatInputs.pcm24k, extra: Self.continuing(id, token: token))
        let refused = try again.waitFor("error")
        #expect(refused.string("message")?.contains("already has a publisher") == true, "\(refused)")
        // The relay has had its chance at the takeover (it runs within milliseconds of the start).
        usleep(1_000_000)
        #expect(holder()?.hasSuffix("/" + id) == true, "\(holder() ?? "no lease")")
        try again.send(#"{"type":"cancel"}"#)
        try again.readUntilClose()
        try publisher.send(#"{"type":"cancel"}"#)
        try publisher.readUntilClose()
    }

    @Test func aRedisRestartedMidBroadcastLosesNoFinal() throws {
        let redis = try TestRedisServer()
        defer { redis.remove() }
        let (first, second) = try Self.servers(redis)
        defer { first.stop(); second.stop() }
        let input = TestInput.pcm16k()
        let (firstHalf, secondHalf, _) = input.split(at: 5.2)

        let there = try second.connect(path: "/v1/listen?channel=stage")
        _ = try there.waitFor("joined")
        let publisher = try first.connect()
        try publisher.start(input, extra: #""channel":"stage""#)
        try publisher.send(audio: firstHalf, of: input)
        try publisher.send(#"{"type":"finalize"}"#)
        _ = try publisher.waitFor("finalized")
        let before = publisher.events.finals
        #expect(!before.isEmpty)
        #expect(try eventually(timeout: 60) {
            try there.readAvailable()
            return there.events.finals.count >= before.count
        })

        // Redis goes away: the publisher goes on captioning; the other instance's viewer is told.
        redis.stop()
        let down = try there.waitFor("relay")
        #expect(down.string("state") == "down", "\(down)")
        try publisher.send(audio: secondHalf, of: input)
        try publisher.send(#"{"type":"finalize"}"#)
        _ = try publisher.waitFor("finalized")
        #expect(publisher.events.finals.count > before.count)
        // A viewer that joins there now is told at once, after its welcome.
        let late = try second.connect(path: "/v1/listen?channel=stage")
        let lateDown = try late.waitFor("relay")
        #expect(lateDown.string("state") == "down", "\(lateDown)")
        #expect(Array(late.events.types.prefix(2)) == ["joined", "publisher"], "\(late.events.types)")

        // Back (empty: no persistence): the viewers are told, and get what they missed, in order.
        try redis.start()
        for viewer in [there, late] {
            let up = try viewer.waitFor("relay")
            #expect(up.string("state") == "up", "\(up)")
        }
        try publisher.end()
        expectEndedNormally(publisher, audio: input.duration, "the publisher")
        for viewer in [there, late] {
            try Self.readToTheEnd(viewer)
            #expect(viewer.events.finals == publisher.events.finals, "\(viewer.events.types)")
            #expect(viewer.events.types.filter { $0 == "relay" }.count == 2, "\(viewer.events.types)")
        }
        #expect(first.log.contains("redis: publishing to"), "\(first.log.all)")
    }
}
