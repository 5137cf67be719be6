import Foundation
import StenoCore
import StenoTestSupport
import Testing
@testable import StenoServer

/// Resume after a dropped connection, on the real server with real speech: nothing heard is
/// lost and every event arrives exactly once.
@Suite struct ServerResumeTests {
    static let input = TestInput.pcm16k()

    static func server(resumeSeconds: Double = 30) throws -> LiveServer {
        try LiveServer { $0.limits.resumeSeconds = resumeSeconds }
    }

    static func resumeMessage(_ ready: WireEvent, after: Int, token: String? = nil) -> String {
        #"{"type":"resume","session":"\#(ready.string("session") ?? "")","resumeToken":"\#(token ?? ready.string("resumeToken") ?? "")","after":\#(after)}"#
    }

    /// The messages from audio time `seconds` on (`seconds` falls on a message boundary: the
    /// server counts whole messages).
    static func messages(from seconds: Double) -> [[UInt8]] {
        var t = 0.0
        var index = 0
        while index < input.messages.count && t < seconds - 1e-6 {
            t += input.messageDuration(input.messages[index])
            index += 1
        }
        #expect(abs(t - seconds) < 1e-6, "the server's count \(seconds) is not a message boundary")
        return Array(input.messages[index...])
    }

    @Test func aDroppedConnectionIsResumedAndEveryEventArrivesExactlyOnce() throws {
        let server = try Self.server()
        let first = try server.connect()
        let ready = try first.start(Self.input)
        #expect(ready.string("resumeToken")?.count == 24)
        // Half the audio (mid-sentence), then the connection drops without `end`.
        let (before, _, _) = Self.input.split(at: Self.input.duration / 2)
        try first.send(audio: before, of: Self.input)
        _ = try first.waitFor("progress")
        let lastSeen = first.events.last?.seq ?? 0
        first.disconnect()
        #expect(eventually { server.log.contains("lost its connection") })

        let second = try server.connect()
        try second.send(Self.resumeMessage(ready, after: lastSeen))
        let resumed = try second.waitFor("resumed")
        #expect(resumed.string("session") == ready.string("session"))
        let received = try #require(resumed.number("received"))
        #expect(received > 0 && received <= Self.input.duration / 2 + 0.11)
        // From where the server is: what it may not have received is sent again.
        try second.send(audio: Self.messages(from: received), of: Self.input)
        try second.end()
        #expect(second.closeCode == 1000)
        // Both connections' sessions are gone once closed: the one resumed and the one the
        // second connection opened (replaced by it) alike.
        #expect(eventually { server.server.sessionCount == 0 && (try? server.metrics()["steno_sessions_active"]) == 0 },
                "\((try? server.metrics()["steno_sessions_active"]) ?? -1)")

        // The client's view: what it had, then what came after `after`, numbered on.
        let replayed = second.events
        #expect(replayed.first?.seq == lastSeen + 1, "\(replayed.prefix(3))")
        let all = Array(first.events.prefix { $0.seq <= lastSeen }) + replayed
        #expect(all.map(\.seq) == Array(1...all.count), "one numbering across both connections")
        #expect(all.filter { $0.type == "ready" }.count == 1)
        #expect(all.last?.type == "ended")
        // Nothing heard was lost: the finals are those of one uninterrupted session.
        #expect(all.finals == Reference.finals(Self.input))
        #expect(abs((all.last?.number("duration") ?? 0) - Self.input.duration) < 0.002)
    }

    @Test func aWrongTokenOrAnUnknownSessionIsRefusedAndTheSessionStaysResumable() throws {
        let server = try Self.server()
        let first = try server.connect()
        let ready = try first.start(Self.input)
        try first.send(audio: Array(Self.input.messages.prefix(10)), of: Self.input)
        _ = try first.waitFor("progress")
        first.disconnect()
        #expect(eventually { server.log.contains("lost its connection") })

        for message in [Self.resumeMessage(ready, after: 1, token: "not-the-token"),
                        #"{"type":"resume","session":"nosuchsession","resumeToken":"x","after":0}"#] {
            let wrong = try server.connect()
            try wrong.send(message)
            try wrong.readUntilClose()
            #expect(wrong.events.first?.errorCode == "resume_failed", "\(wrong.events)")
            #expect(wrong.events.first?.bool("fatal") == true)
            #expect(wrong.closeCode == 4404)
        }
        // Events after a seq the server never sent cannot be replayed.
        let ahead = try server.connect()
        try ahead.send(Self.resumeMessage(ready, after: 9999))
        try ahead.readUntilClose()
        #expect(ahead.closeCode == 4404)

        let right = try server.connect()
        try right.send(Self.resumeMessage(ready, after: 1))
        _ = try right.waitFor("resumed")
        try right.end()
        #expect(right.closeCode == 1000)
    }

    @Test func afterTheGracePeriodTheSessionIsFinalizedForItsChannelAndCannotBeResumed() throws {
        let server = try Self.server(resumeSeconds: 1)
        let viewer = try server.connect(path: "/v1/listen?channel=grace")
        _ = try viewer.waitFor("joined")
        let first = try server.connect()
        let ready = try first.start(Self.input, extra: #""channel":"grace""#)
        try first.send(audio: Self.input.messages, of: Self.input)
        _ = try first.waitFor("progress")
        first.disconnect()
        // The audio the server had is still captioned, for the channel.
        #expect(eventually(timeout: 120) { server.log.contains("session \(ready.string("session") ?? "") closed") })
        let late = try server.connect()
        try late.send(Self.resumeMessage(ready, after: 1))
        try late.readUntilClose()
        #expect(late.closeCode == 4404)
        try viewer.readAvailable()
        #expect(viewer.events.finals == Reference.finals(Self.input), "every final of the audio received")
        // The refused connection's own session goes once the server has seen it close.
        #expect(eventually { server.server.sessionCount == 0 }, "nothing is left behind")
    }

    /// The events a detached session holds for its client are bounded like a connection's
    /// queue (`limits.outboundBytes`). Beyond it the client could no longer be given the
    /// session whole: it is not resumed (4404), and the session ends as when its grace period
    /// runs out, its channel getting every final of the audio it had.
    @Test func eventsHeldBeyondTheQueueEndTheDetachedSessionForItsChannel() throws {
        let server = try LiveServer {
            $0.limits.resumeSeconds = 30
            $0.limits.outboundBytes = 1024
        }
        let viewer = try server.connect(path: "/v1/listen?channel=held-overflow")
        _ = try viewer.waitFor("joined")
        let first = try server.connect()
        let ready = try first.start(Self.input, extra: #""channel":"held-overflow""#)
        // All the audio at once, and gone before much of it is analyzed: its events (more than
        // 1 KiB of them) are made while the session is detached.
        try first.send(audio: Self.input.messages, of: Self.input)
        first.disconnect()
        let id = ready.string("session") ?? ""
        #expect(eventually(timeout: 120) { server.log.contains("session \(id): more events made while its client was away") },
                "\(server.log.all)")
        let late = try server.connect()
        try late.send(Self.resumeMessage(ready, after: 1))
        try late.readUntilClose()
        #expect(late.events.first?.errorCode == "resume_failed", "\(late.events)")
        #expect(late.closeCode == 4404)
        // Long before the 30 s grace period, the rest analyzed for the channel.
        #expect(eventually(timeout: 120) { server.log.contains("session \(id) closed") }, "\(server.log.all)")
        try viewer.readAvailable()
        #expect(viewer.events.finals == Reference.finals(Self.input), "every final of the audio received")
        #expect(eventually { server.server.sessionCount == 0 })
    }

    /// The server keeps the last events written to a connection for a resume
    /// (`resumeRetainedBytes`, 256 KiB by default, 1 KiB here): a resume from before them is
    /// refused (it would miss events), and the session stays resumable from where they start.
    @Test func aResumeFromBeforeTheEventsKeptIsRefusedAndOneFromLaterIsGranted() throws {
        let server = try LiveServer {
            $0.limits.resumeSeconds = 30
            $0.resumeRetainedBytes = 1024
        }
        let first = try server.connect()
        let ready = try first.start(Self.input)
        try first.send(audio: Self.input.messages, of: Self.input)
        // More than 1 KiB of events after `ready`: finals carry their words.
        while first.events.dropFirst().map(\.text.utf8.count).reduce(0, +) < 2048 {
            _ = try first.waitFor("final")
        }
        let lastSeen = first.events.last?.seq ?? 0
        first.disconnect()
        #expect(eventually { server.log.contains("lost its connection") })

        let early = try server.connect()
        try early.send(Self.resumeMessage(ready, after: 1))
        try early.readUntilClose()
        #expect(early.events.first?.errorCode == "resume_failed", "\(early.events)")
        #expect(early.events.first?.text.contains("no longer kept") == true, "\(early.events)")
        #expect(early.closeCode == 4404)

        let late = try server.connect()
        try late.send(Self.resumeMessage(ready, after: lastSeen))
        let resumed = try late.waitFor("resumed")
        let received = try #require(resumed.number("received"))
        if received + 0.01 < Self.input.duration {
            try late.send(audio: Self.messages(from: received), of: Self.input)
        }
        try late.end()
        #expect(late.closeCode == 1000)
        let all = Array(first.events.prefix { $0.seq <= lastSeen }) + late.events
        #expect(all.map(\.seq) == Array(1...all.count), "one numbering across both connections")
        #expect(all.finals == Reference.finals(Self.input))
    }

    @Test func aResumeThatOvertakesTheOldConnectionsCloseTakesOver() throws {
        let server = try Self.server()
        let old = try server.connect()
        let ready = try old.start(Self.input)
        let (before, _, _) = Self.input.split(at: 3)
        try old.send(audio: before, of: Self.input)
        _ = try old.waitFor("progress")
        let lastSeen = old.events.last?.seq ?? 0
        // The client has moved to a new network; the server still sees the old connection.
        let new = try server.connect()
        try new.send(Self.resumeMessage(ready, after: lastSeen))
        let resumed = try new.waitFor("resumed")
        #expect(resumed.seq > lastSeen)
        try old.readUntilClose(timeout: 30)
        #expect(old.isClosed, "the old connection is dropped")
        let received = try #require(resumed.number("received"))
        try new.send(audio: Self.messages(from: received), of: Self.input)
        try new.end()
        let all = Array(old.events.prefix { $0.seq <= lastSeen }) + new.events
        #expect(all.map(\.seq) == Array(1...all.count))
        #expect(all.finals == Reference.finals(Self.input))
    }

    @Test func withResumeOffADroppedSessionEndsAtOnce() throws {
        let server = try Self.server(resumeSeconds: 0)
        let client = try server.connect()
        let ready = try client.start(Self.input)
        #expect(ready.string("resumeToken") == nil)
        #expect(ready.text.contains(#""resumeSeconds":0"#))
        client.disconnect()
        #expect(eventually { server.server.sessionCount == 0 })
    }
}
