import StenoCore
import StenoSession
import StenoSystem
import Testing

/// The session driver's timers, in memory with a clock moved by hand: audio batches and their
/// linger, the idle timeout, and a stalled utterance made final.
@Suite struct DriverClockTests {
    static let quiet = SessionLimits(idleTimeoutSeconds: 0, stallSeconds: 0)

    @Test func audioGoesToThePipelineInBlocksNotMessages() throws {
        let (engine, host) = try RecordingHost.started(Self.quiet)
        // 20 ms messages: nothing reaches the recognizer until a block's worth (0.128 s) is in.
        for _ in 0..<6 { host.send(seconds: 0.02, loud: false) }
        host.executor.runUntilIdle()
        #expect(engine.tape.samples == 0)
        host.send(seconds: 0.02, loud: false)
        #expect(host.executor.queuedCount == 1)
        host.executor.runUntilIdle()
        #expect(engine.tape.all == [.accept(320), .accept(320), .accept(320), .accept(320), .accept(320), .accept(320), .accept(320)])
        // Then the batch goes as soon as it completes the recognizer's next block (4096 samples
        // in all: 1856 more, six messages), not a whole batch later.
        for _ in 0..<5 { host.send(seconds: 0.02, loud: false) }
        host.executor.runUntilIdle()
        #expect(engine.tape.samples == 7 * 320)
        host.send(seconds: 0.02, loud: false)
        host.executor.runUntilIdle()
        #expect(engine.tape.samples == 13 * 320)
    }

    @Test func aShortBatchGoesAfterItsLingerAndTheSessionSaysWhen() throws {
        let (engine, host) = try RecordingHost.started(Self.quiet)
        let linger = DriverOptions().batchLinger
        let sent = host.clock.now()
        host.send(seconds: 0.02, loud: false)
        host.send(seconds: 0.02, loud: false)
        // A talker is due at the next tick; once visited, when its short batch has lingered.
        #expect(host.due == -.infinity)
        host.tick()
        #expect(host.due == sent + linger)
        host.clock.advance(linger / 2)
        host.tickAndRun()
        #expect(engine.tape.samples == 0)
        host.clock.advance(to: sent + linger)
        host.tickAndRun()
        #expect(engine.tape.samples == 640)
    }

    /// A session that asks for no volatile results has a recognizer that makes none (the
    /// Whisper engine's volatiles are most of a talker's cost).
    @Test func aSessionWithoutVolatileResultsAsksForNoVolatiles() throws {
        let (plain, _) = try RecordingHost.started(Self.quiet)
        let (quiet, _) = try RecordingHost.started(Self.quiet, volatile: false)
        #expect(plain.asked.withLock { $0.map(\.volatileResults) } == [true])
        #expect(quiet.asked.withLock { $0.map(\.volatileResults) } == [false])
    }

    @Test func withoutBatchesEachMessageGoesAsItComes() throws {
        let (engine, host) = try RecordingHost.started(Self.quiet, options: .inline)
        host.send(seconds: 0.02, loud: false)
        host.executor.runUntilIdle()
        #expect(engine.tape.all == [.accept(320)])
    }

    @Test func aQuietSessionEndsAtItsIdleTimeoutNotBefore() throws {
        let (_, host) = try RecordingHost.started(SessionLimits(idleTimeoutSeconds: 5, stallSeconds: 0))
        let started = host.clock.now()
        host.send(seconds: 0.128, loud: false)
        host.executor.runUntilIdle()
        // Ticked whenever it says it is due, up to just before the timeout: it goes on.
        while true {
            host.tickAndRun()
            guard let due = host.due, due.isFinite, due < started + 5 else { break }
            host.clock.advance(to: due)
        }
        #expect(host.due == started + 5)
        #expect(host.record.close == nil)
        host.clock.advance(to: started + 5)
        host.tickAndRun()
        #expect(host.record.close != nil)
        #expect(host.kinds.last == "error")
        #expect(host.record.events.last?.contains("no audio and no message for 5 s") == true)
    }

    @Test func anUtteranceWhoseAudioStopsIsMadeFinalAfterTheStall() throws {
        let (engine, host) = try RecordingHost.started(SessionLimits(idleTimeoutSeconds: 0, stallSeconds: 2))
        let spoke = host.clock.now()
        host.send(seconds: 0.128, loud: true)
        host.send(seconds: 0.128, loud: true)
        host.executor.runUntilIdle()
        #expect(host.kinds.contains("speech"))
        host.tick()
        // Due at the stall (or sooner, for progress), never later.
        #expect((host.due ?? .infinity) <= spoke + 2)
        host.clock.advance(1.99)
        host.tickAndRun()
        #expect(!engine.tape.all.contains(.endUtterance))
        #expect(!host.kinds.contains("final"))
        host.clock.advance(to: spoke + 2)
        host.tickAndRun()
        #expect(engine.tape.all.contains(.endUtterance))
        #expect(host.kinds.contains("final"))
        let stalls = host.notes.compactMap { if case .stallFinalized(let s) = $0 { s } else { nil } }
        #expect(stalls.count == 1 && abs(stalls[0] - 2) < 1e-9)
        // Released once: later ticks do not finalize again until audio comes.
        host.clock.advance(5)
        host.tickAndRun()
        #expect(engine.tape.all.filter { $0 == .endUtterance }.count == 1)
    }

    @Test func aFinalizeTheClientWaitsForIsNotAStall() throws {
        let (engine, host) = try RecordingHost.started(SessionLimits(idleTimeoutSeconds: 0, stallSeconds: 2))
        host.send(seconds: 0.256, loud: true)
        host.executor.runUntilIdle()
        host.receivedText(#"{"type":"finalize"}"#)
        host.executor.runUntilIdle()
        #expect(host.kinds.contains("finalized"))
        let finalsAfterFinalize = engine.tape.all.filter { $0 == .endUtterance }.count
        // Quiet for longer than the stall: speech ended with the finalize, nothing to release.
        host.clock.advance(3)
        host.tickAndRun()
        #expect(engine.tape.all.filter { $0 == .endUtterance }.count == finalsAfterFinalize)
        #expect(host.notes.allSatisfy { if case .stallFinalized = $0 { false } else { true } })
    }
}
