import Testing
@testable import StenoCore

/// Resume after a dropped connection, and gaps in the timeline, as the machine decides them.
@Suite struct SessionResumeTests {
    static func started(resumeSeconds: Double = 30, bufferSeconds: Double = 10) -> Harness {
        var h = Harness(limits: SessionLimits(bufferSeconds: bufferSeconds, idleTimeoutSeconds: 30,
                                              resumeSeconds: resumeSeconds), resumeToken: "tok")
        h.start()
        return h
    }

    @Test func readyCarriesTheTokenOnlyWhenSessionsCanBeResumed() {
        let h = Self.started()
        #expect(h.sent[0].text.contains(#""resumeToken":"tok""#))
        #expect(h.sent[0].text.contains(#""resumeSeconds":30"#))
        let off = Self.started(resumeSeconds: 0)
        #expect(!off.sent[0].text.contains("resumeToken"))
        #expect(off.machine.acceptsResume(token: "tok") == false)
        #expect(h.machine.acceptsResume(token: "tok"))
        #expect(!h.machine.acceptsResume(token: "to"))
        #expect(!h.machine.acceptsResume(token: "tok2"))
    }

    @Test func aLostConnectionDetachesTheSessionWhichGoesOnAndResumes() {
        var h = Self.started()
        h.stream(seconds: 2)
        #expect(h.feed(.connectionLost(now: 101)) == [], "nothing is cancelled")
        #expect(h.machine.isDetached && !h.machine.isClosed)
        // Analysis goes on; its events are still made (the server holds them).
        #expect(h.results([.final(result(0.2, 0.8, "hi"))], analyzed: 2)
            == [#"{"type":"final","seq":2,"start":0.2,"end":0.8,"text":"hi","words":[]}"#])
        // Neither idle nor the grace period yet.
        #expect(h.tick(at: 130).allSatisfy { $0.contains("progress") })
        #expect(h.feed(.attached(now: 130.5)) == [#"{"type":"resumed","seq":4,"session":"s-1","received":2}"#])
        #expect(!h.machine.isDetached)
        // Back to normal: audio continues the timeline.
        #expect(h.audio(Harness.pcm(seconds: 1)) == ["audio 2+1"])
    }

    @Test func theGracePeriodEndsTheSessionWithoutAClose() {
        var h = Self.started(resumeSeconds: 5)
        h.stream(seconds: 1)
        h.feed(.connectionLost(now: 100.5))
        #expect(h.tick(at: 105.4).allSatisfy { $0.contains("progress") })
        #expect(h.tick(at: 105.5).first == "end", "finalized when the grace period is over")
        #expect(h.results([.final(result(0.1, 0.9, "late"))], analyzed: 1).count == 1, "its finals are still made")
        #expect(h.feed(.endCompleted) == [], "nobody to send ended or a close to")
        #expect(h.machine.phase == .disconnected)
        #expect(h.feed(.attached(now: 106)) == [], "too late")
    }

    @Test func heldEventsOverTheQueueForfeitTheResumeAndEndTheSessionForItsChannel() {
        var h = Self.started()
        h.stream(seconds: 1)
        h.feed(.connectionLost(now: 101))
        // The server could not hold another event for the client.
        #expect(h.feed(.outboundOverflow) == ["end"], "finalized, not failed: there is no one to tell")
        #expect(h.machine.resumeForfeited && !h.machine.acceptsResume(token: "tok"))
        #expect(h.feed(.outboundOverflow) == [], "once")
        #expect(h.results([.final(result(0.1, 0.9, "still made"))], analyzed: 1).count == 1, "for the channel")
        #expect(h.feed(.endCompleted) == [])
        #expect(h.machine.phase == .disconnected)
        // Connected, it is the client that is not reading: slow_consumer, as ever.
        var connected = Self.started()
        #expect(connected.feed(.outboundOverflow).last == "close 4008 slow_consumer")
        #expect(!connected.machine.resumeForfeited)
    }

    @Test func withoutResumeALostConnectionIsTheEnd() {
        var h = Self.started(resumeSeconds: 0)
        h.stream(seconds: 1)
        #expect(h.feed(.connectionLost(now: 101)) == ["cancelPipeline"])
        #expect(h.machine.phase == .disconnected)
        // Before `start` there is nothing to resume either.
        var fresh = Harness(limits: SessionLimits(resumeSeconds: 30), resumeToken: "tok")
        #expect(fresh.feed(.connectionLost(now: 101)) == [])
        #expect(fresh.machine.phase == .disconnected)
    }

    @Test func aPausedSessionIsPausedAgainOnItsNewConnection() {
        var h = Self.started(bufferSeconds: 2)
        h.stream(seconds: 2)
        #expect(h.machine.isReadingPaused)
        h.feed(.connectionLost(now: 101))
        #expect(h.feed(.attached(now: 102)) == [#"{"type":"resumed","seq":2,"session":"s-1","received":2}"#, "pause"])
        #expect(h.results([], analyzed: 1.5) == ["resume"])
    }

    @Test func resumeInsteadOfStartAsksTheServerAndARefusalIsFatal() {
        var h = Harness(limits: SessionLimits(resumeSeconds: 30), resumeToken: "new")
        #expect(h.text(#"{"type":"resume","session":"old-1","resumeToken":"t","after":7}"#) == ["resume old-1 after 7"])
        #expect(h.machine.phase == .awaitingStart)
        #expect(h.feed(.resumeRejected("no session \"old-1\"")) == [
            errorEvent(1, .resumeFailed, "no session \"old-1\""), "close 4404 resume_failed"])
        // After start, resume is a second start.
        var started = Self.started()
        #expect(started.text(#"{"type":"resume","session":"x","resumeToken":"t","after":0}"#).last == "close 4400 not_started")
        // Malformed: named field, not fatal.
        var bad = Harness()
        #expect(bad.text(#"{"type":"resume","session":"x","after":1}"#)
            == [errorEvent(1, .badMessage, "field \"resumeToken\" is missing")])
        #expect(bad.text(#"{"type":"resume","session":"x","resumeToken":"t","after":-1}"#).first?.contains("after") == true)
    }

    @Test func aGapMovesTheTimelineAndIsReported() {
        var h = Self.started()
        h.stream(seconds: 1)
        #expect(h.text(#"{"type":"gap","duration":2.5}"#)
            == ["gap 2.5", #"{"type":"gap","seq":2,"start":1,"end":3.5}"#])
        #expect(h.machine.receivedSeconds == 3.5)
        #expect(h.audio(Harness.pcm(seconds: 0.5)) == ["audio 3.5+0.5"])
        // Bad durations are refused without harm.
        #expect(h.text(#"{"type":"gap","duration":0}"#).first?.contains("bad_message") == true)
        #expect(h.text(#"{"type":"gap","duration":4000}"#).first?.contains("bad_message") == true)
        #expect(h.text(#"{"type":"gap"}"#).first?.contains("bad_message") == true)
        #expect(h.machine.receivedSeconds == 4)
        // Opus timelines count in 48 kHz units: the gap is rounded to them.
        var opus = Harness()
        opus.start("opus", rate: 48000)
        #expect(opus.text(#"{"type":"gap","duration":0.0200001}"#).first == "gap 0.02")
        // Before start it is not_started; while ending it is ignored.
        var early = Harness()
        #expect(early.text(#"{"type":"gap","duration":1}"#).last == "close 4400 not_started")
        h.text(#"{"type":"end"}"#)
        #expect(h.text(#"{"type":"gap","duration":1}"#).first?.contains("is ignored") == true)
    }
}
