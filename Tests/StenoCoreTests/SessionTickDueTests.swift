import Testing
@testable import StenoCore

/// `SessionMachine.nextTickDue`: the server ticks a session only when it is due, so a tick
/// before it must never have done anything. Checked on the timers one by one and on random
/// input sequences, against the tick itself.
@Suite struct SessionTickDueTests {
    @Test func eachTimerIsDueWhenItsTickWouldAct() {
        // The start deadline, from the connection's opening (100).
        var waiting = Harness(limits: SessionLimits(idleTimeoutSeconds: 0, startTimeoutSeconds: 5))
        #expect(waiting.machine.nextTickDue == 105)
        // Idle before start, whichever comes first.
        let idle = Harness(limits: SessionLimits(idleTimeoutSeconds: 3, startTimeoutSeconds: 5))
        #expect(idle.machine.nextTickDue == 103)
        waiting.now = 104
        waiting.text(#"{"type":"nonsense"}"#)
        #expect(waiting.machine.nextTickDue == 105, "what it sends does not move the deadline")

        // Started with no timer and nothing received: nothing is due.
        var quiet = Harness(limits: SessionLimits(maxSessionSeconds: 0, idleTimeoutSeconds: 0, startTimeoutSeconds: 5))
        quiet.start()
        #expect(quiet.machine.nextTickDue == .infinity)
        // Audio owes a progress event (the first at once), then one a second at most.
        quiet.stream(seconds: 0.5)
        #expect(quiet.machine.nextTickDue == -.infinity)
        #expect(quiet.tick(at: 100.2).first?.contains("progress") == true)
        #expect(quiet.machine.nextTickDue == .infinity, "told, and nothing moved since")
        quiet.results([], analyzed: 0.5)
        #expect(quiet.machine.nextTickDue == 101.2)

        // The session limit and the idle timeout, from start and from the last activity.
        var limited = Harness(limits: SessionLimits(maxSessionSeconds: 60, idleTimeoutSeconds: 30))
        limited.now = 110
        limited.start()
        #expect(limited.machine.nextTickDue == 140)
        limited.now = 135
        limited.text(#"{"type":"x"}"#)
        #expect(limited.machine.nextTickDue == 165, "the idle timeout comes first")
        limited.now = 150
        limited.text(#"{"type":"x"}"#)
        #expect(limited.machine.nextTickDue == 170, "the session limit comes first")
        // An outstanding finalize holds the idle timer.
        limited.stream(seconds: 0.2)
        limited.tick(at: 150)
        limited.text(#"{"type":"finalize"}"#)
        #expect(limited.machine.nextTickDue == 170)

        // Detached: the idle timer stops, the grace period runs.
        var detached = Harness(limits: SessionLimits(maxSessionSeconds: 0, idleTimeoutSeconds: 30, resumeSeconds: 20),
                               resumeToken: "t")
        detached.start()
        detached.feed(.connectionLost(now: 107))
        #expect(detached.machine.nextTickDue == 127)
        #expect(detached.tick(at: 126.9).isEmpty)
        #expect(detached.tick(at: 127) == ["end"])
        // Ending and closed.
        #expect(detached.machine.nextTickDue == .infinity)
        detached.feed(.endCompleted)
        #expect(detached.machine.isClosed && detached.machine.nextTickDue == .infinity)
    }

    /// Any sequence of inputs: a tick before `nextTickDue` does nothing (and leaves the
    /// machine as it was, so ticking it is no change a skipped tick would have missed).
    @Test func aTickBeforeTheMachineIsDueNeverActs() throws {
        var rng: UInt64 = 2718
        func next(_ n: Int) -> Int {
            rng = rng &* 6364136223846793005 &+ 1442695040888963407
            return Int((rng >> 33) % UInt64(n))
        }
        let texts = [
            #"{"type":"start","audio":{"encoding":"pcm_s16le","sampleRate":16000,"channels":1}}"#,
            #"{"type":"finalize"}"#, #"{"type":"end"}"#, #"{"type":"cancel"}"#, #"{"type":"x"}"#,
            #"{"type":"silence","duration":0.5}"#, #"{"type":"gap","duration":0.25}"#,
        ]
        var checked = 0, acted = 0
        for round in 0..<300 {
            let limits = SessionLimits(maxSessionSeconds: [0, 40][round % 2], idleTimeoutSeconds: [0, 15][(round / 2) % 2],
                                       resumeSeconds: 12, startTimeoutSeconds: [0, 8][(round / 4) % 2])
            var h = Harness(limits: limits, resumeToken: "token")
            var analyzed = 0.0
            for _ in 0..<50 {
                let due = h.machine.nextTickDue
                // Ticks from just after now to past the due time: none before it acts.
                for step in [0.01, 0.3, 1, 4, 9, 20] {
                    let t = h.now + step
                    var copy = h
                    let actions = copy.tick(at: t)
                    if t < due {
                        checked += 1
                        #expect(actions.isEmpty, "a tick at \(t) before the due time \(due) did \(actions)")
                    } else if !actions.isEmpty {
                        acted += 1
                    }
                }
                h.now += Double(next(300)) / 100
                switch next(10) {
                case 0, 1: h.text(texts[next(texts.count)])
                case 2, 3: h.stream(seconds: Double(next(4) + 1) / 10)
                case 4:
                    analyzed = min(h.machine.receivedSeconds, analyzed + Double(next(50)) / 100)
                    h.results([], analyzed: analyzed)
                case 5: h.feed([.finalizeCompleted, .endCompleted][next(2)])
                case 6: h.feed(.connectionLost(now: h.now))
                case 7: h.feed(.attached(now: h.now))
                case 8: h.tick(at: h.now)
                default: h.tick(at: max(h.now, min(h.machine.nextTickDue, h.now + 30)))
                }
            }
        }
        #expect(checked > 10_000)
        #expect(acted > 1_000, "the sequences reach the timers")
    }
}
