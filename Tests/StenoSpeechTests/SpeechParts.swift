import Foundation
import StenoCore
import StenoSystem
import Testing
@testable import StenoSpeech

// The engine-neutral speech parts on their own, without a model: the pool's lending and line
// with things that cost nothing to make, the mailbox, the utterance gate fed by a scripted
// detector, and the endpointing decision.

/// A detector that hears speech in every sample louder than 0.1: speech starts at the first
/// loud sample, and ends at the first quiet one once half a second has been quiet (decided
/// then, as a real detector decides after the fact).
final class LoudnessDetector: VoiceDetector {
    static let hangover = 8000
    private var fed = 0
    private var speaking = false
    /// The first quiet sample after speech, while it is not yet decided.
    private var quietSince: Int?

    var decidedSamples: Int { fed }

    func accept(_ samples: UnsafeBufferPointer<Float>) -> [TranscriberEvent] {
        var events: [TranscriberEvent] = []
        for sample in samples {
            let loud = abs(sample) > 0.1
            if loud {
                quietSince = nil
                if !speaking {
                    speaking = true
                    events.append(.speechStarted(at: Double(fed) / 16000))
                }
            } else if speaking {
                let since = quietSince ?? fed
                quietSince = since
                if fed + 1 - since >= Self.hangover {
                    speaking = false
                    quietSince = nil
                    events.append(.speechEnded(at: Double(since) / 16000))
                }
            }
            fed += 1
        }
        return events
    }
}

/// A `LoudnessDetector` that decides `delay` samples late, as one that first settles its noise
/// estimate on the start of a stream does, and says so (`undecidedSamples`).
final class LateDetector: VoiceDetector {
    private let inner = LoudnessDetector()
    private let delay: Int
    private var held: [Float] = []

    init(delay: Int) { self.delay = delay }

    var undecidedSamples: Int { delay }
    var decidedSamples: Int { inner.decidedSamples }

    func accept(_ samples: UnsafeBufferPointer<Float>) -> [TranscriberEvent] {
        held += samples
        guard held.count > delay else { return [] }
        let ready = held.count - delay
        let events = inner.accept(Array(held.prefix(ready)))
        held.removeFirst(ready)
        return events
    }
}

/// Silence and loud stretches, `seconds` each, in turn from silence.
private func audio(_ stretches: [Double]) -> [Float] {
    var samples: [Float] = []
    for (index, seconds) in stretches.enumerated() {
        let loud = index % 2 == 1
        samples += (0..<Int(seconds * 16000)).map { i in loud ? (i % 2 == 0 ? 0.5 : -0.5) : Float(i % 7) * 0.001 }
    }
    return samples
}

@Suite struct UtteranceGateTests {
    static func gate(maximum: Int = 16000 * 25) throws -> UtteranceGate {
        try UtteranceGate(sampleRate: 16000, preRoll: 4800, tail: 3200, maximumLength: maximum,
                          makeDetector: { LoudnessDetector() })
    }

    /// Feeds `samples` in chunks of `chunk`: the events and the cuts.
    static func hear(_ gate: UtteranceGate, _ samples: [Float], chunk: Int) -> ([TranscriberEvent], [UtteranceGate.Cut]) {
        var events: [TranscriberEvent] = []
        var cuts: [UtteranceGate.Cut] = []
        var at = 0
        while at < samples.count {
            let end = min(samples.count, at + chunk)
            let heard = Array(samples[at..<end]).withUnsafeBufferPointer { gate.hear($0) }
            events += heard.events
            cuts += heard.cuts
            at = end
        }
        return (events, cuts)
    }

    /// An utterance opens the pre-roll before the onset, closes the tail after the end of
    /// speech, and carries exactly that audio; what was silent long before is not kept.
    @Test func anUtteranceIsTheSpeechWithItsPreRollAndTail() throws {
        let samples = audio([3, 0.5, 1])
        let gate = try Self.gate()
        let (events, cuts) = Self.hear(gate, samples, chunk: 1600)
        #expect(events == [.speechStarted(at: 3), .speechEnded(at: 3.5)])
        let cut = try #require(cuts.first)
        #expect(cuts.count == 1)
        #expect(cut.start == 48000 - 4800 && cut.end == 56000 + 3200)
        #expect(Array(cut.samples) == Array(samples[cut.start..<cut.end]))
        #expect(gate.utteranceStart == nil && !gate.isSpeaking)
        #expect(gate.received == samples.count)
    }

    /// A detector that reports an onset late (here 0.64 s, as Whisper's settling one does at
    /// the start of a stream) still gets the whole pre-roll: the gate keeps what the detector
    /// holds undecided too. (It kept the pre-roll alone, and cut the first word of every
    /// stream whose speech starts at once: the LibriVox sentences' WER went 1.4 % → 8.5 %.)
    @Test func aLateOnsetStillGetsItsPreRoll() throws {
        let samples = audio([0.5, 2, 2])
        let gate = try UtteranceGate(sampleRate: 16000, preRoll: 4800, tail: 3200, maximumLength: 16000 * 25,
                                     makeDetector: { LateDetector(delay: 10240) })
        let (events, cuts) = Self.hear(gate, samples, chunk: 1600)
        #expect(events.first == .speechStarted(at: 0.5))
        let cut = try #require(cuts.first)
        #expect(cut.start == 8000 - 4800)
        #expect(Array(cut.samples) == Array(samples[cut.start..<cut.end]))
    }

    /// With a hangover, the detector's end of speech (here after 0.5 s of quiet) opens a pause
    /// whose cut is known at once; speech back within the hangover (0.8 s from the pause's
    /// start) goes on in the same utterance, with no events; past it, the utterance closes
    /// with its end of speech where the pause began, the cut being the one the pause showed.
    @Test func aHangoverJoinsSpeechThatComesBackAndClosesOnTheRest() throws {
        let gate = try UtteranceGate(sampleRate: 16000, preRoll: 4800, tail: 3200, maximumLength: 16000 * 25,
                                     hangover: 12800, makeDetector: { LoudnessDetector() })
        // Speech 1–2 s, 0.6 s quiet, speech 2.6–3.6 s, then 2 s quiet.
        let samples = audio([1, 1, 0.6, 1, 2])
        var events: [TranscriberEvent] = []
        var cuts: [UtteranceGate.Cut] = []
        var pauses: [UtteranceGate.Cut] = []
        var at = 0
        while at < samples.count {
            let end = min(samples.count, at + 800)
            let heard = Array(samples[at..<end]).withUnsafeBufferPointer { gate.hear($0) }
            events += heard.events
            cuts += heard.cuts
            if let pause = gate.pauseCut(), pauses.last?.end != pause.end { pauses.append(pause) }
            at = end
        }
        #expect(events == [.speechStarted(at: 1), .speechEnded(at: 3.6)])
        // Two pauses told: the one speech came back after, and the last.
        #expect(pauses.map(\.end) == [32000 + 3200, 57600 + 3200])
        let cut = try #require(cuts.first)
        #expect(cuts.count == 1)
        #expect(cut.start == 16000 - 4800 && cut.end == 57600 + 3200)
        #expect(Array(cut.samples) == Array(pauses[1].samples))
        #expect(gate.pauseStart == nil && !gate.isSpeaking && gate.utteranceStart == nil)

        // What followed a pause's cut is quiet, against the utterance, until speech comes back.
        let again = try UtteranceGate(sampleRate: 16000, preRoll: 4800, tail: 3200, maximumLength: 16000 * 25,
                                      hangover: 12800, makeDetector: { LoudnessDetector() })
        _ = Self.hear(again, audio([1, 1, 0.6]), chunk: 800)
        let pause = try #require(again.pauseCut())
        #expect(again.isQuiet(from: pause.end))
        _ = Self.hear(again, Array(audio([0, 0.05]).suffix(800)), chunk: 800)
        #expect(!again.isQuiet(from: pause.end))

        // Without the hangover the same audio is two utterances.
        let (plain, plainCuts) = Self.hear(try Self.gate(), samples, chunk: 800)
        #expect(plain.count == 4 && plainCuts.count == 2)
    }

    /// How the audio is cut into calls changes nothing (the detector decides on whole calls).
    @Test func chunkingDoesNotChangeTheUtterances() throws {
        let samples = audio([0.2, 0.7, 0.9, 1.3, 0.4, 0.3, 1])
        var seen: [[Int]] = []
        for chunk in [160, 1000, 4096, samples.count] {
            let (events, cuts) = Self.hear(try Self.gate(), samples, chunk: chunk)
            #expect(events.count == 4)
            for cut in cuts { #expect(Array(cut.samples) == Array(samples[cut.start..<min(samples.count, cut.end)])) }
            seen.append(cuts.flatMap { [$0.start, $0.end] })
        }
        #expect(Set(seen).count == 1, "\(seen)")
        // The onset 0.2 s in: the pre-roll reaches back only as far as the audio does.
        #expect(seen[0].first == 0)
    }

    /// Speech longer than the maximum is cut at the quietest point of its last 1.5 s (in steady
    /// sound, as late as it can be: 0.1 s before what was heard), and goes on in the next
    /// utterance from the cut; an utterance cut while speech goes on (a finalize) likewise.
    @Test func longSpeechIsCutAtTheMaximumAndGoesOn() throws {
        let gate = try Self.gate(maximum: 16000)
        let (_, cuts) = Self.hear(gate, audio([1, 2.5]), chunk: 1600)
        #expect(cuts.count >= 2 && cuts.allSatisfy { $0.speechGoesOn }, "\(cuts.map { ($0.start, $0.end) })")
        #expect(cuts.first?.start == 16000 - 4800)
        // Each within the maximum, at least half of it, and the next going on from it.
        for cut in cuts { #expect(cut.end - cut.start <= 16000 && cut.end - cut.start >= 8000) }
        #expect(zip(cuts, cuts.dropFirst()).allSatisfy { $0.end == $1.start })
        let lastEnd = try #require(cuts.last?.end)
        #expect(gate.isSpeaking && gate.utteranceStart == lastEnd)
        let finalized = try #require(gate.cut(at: gate.received))
        #expect(finalized.start == lastEnd && finalized.end == 56000)
        #expect(finalized.samples.count == 56000 - finalized.start)
        #expect(gate.utteranceStart == 56000, "speech goes on: the next utterance starts at the cut")
        // The end of input: speech ends with the input.
        #expect(gate.endSpeech() == .speechEnded(at: 3.5))
        #expect(gate.utteranceStart == nil && gate.endSpeech() == nil)
    }

    /// Silence the client left out moves the timeline on; a fresh detector hears what follows,
    /// whose times are on the timeline.
    @Test func declaredSilenceMovesTheTimeline() throws {
        let gate = try Self.gate()
        _ = Self.hear(gate, audio([0.5, 0.25]), chunk: 800)
        #expect(gate.isSpeaking)
        let cut = try #require(gate.cut(at: gate.received))
        #expect(cut.end == 12000)
        #expect(gate.endSpeech() == .speechEnded(at: 0.75))
        try gate.skip(16000 * 10)
        #expect(gate.received == 12000 + 160000)
        let (events, cuts) = Self.hear(gate, audio([0.5, 0.5, 1]), chunk: 800)
        #expect(events == [.speechStarted(at: 11.25), .speechEnded(at: 11.75)])
        #expect(cuts.map(\.start) == [180000 - 4800])
        #expect(cuts.first?.samples.count == 4800 + 8000 + 3200)
    }

    /// What an utterance said is done with (its words made final): it goes on from there, and
    /// what is heard of it from then on is what follows.
    @Test func anUtteranceGoesOnAfterWordsMadeFinal() throws {
        let samples = audio([1, 2])
        let gate = try Self.gate()
        _ = Self.hear(gate, samples, chunk: 1600)
        let start = try #require(gate.utteranceStart)
        #expect(Array(gate.audio(from: start)) == Array(samples[start...]))
        gate.continueUtterance(from: 30000)
        #expect(gate.utteranceStart == 30000)
        #expect(Array(gate.audio(from: 30000)) == Array(samples[30000...]))
        let cut = try #require(gate.cut(at: gate.received))
        #expect(cut.start == 30000 && Array(cut.samples) == Array(samples[30000...]))
        gate.discard()
        #expect(gate.utteranceStart == nil && gate.cut(at: gate.received) == nil)
    }
}

@Suite struct SharedPoolTests {
    final class Thing: Sendable {
        let serial: Int
        let worn: Bool
        init(_ serial: Int, worn: Bool = false) {
            self.serial = serial
            self.worn = worn
        }
    }

    final class Maker: Sendable {
        let made = Locked(0)
        let fails = Locked(false)
        func make() throws(StenoError) -> Thing {
            if fails.withLock({ $0 }) { throw StenoError(.internal, "cannot make one") }
            return Thing(made.withLock { $0 += 1; return $0 })
        }
    }

    final class Wakes: Sendable {
        let count = Locked(0)
        func waiter() -> PoolWaiter<Thing> { PoolWaiter(wake: { self.count.withLock { $0 += 1 } }) }
        var value: Int { count.withLock { $0 } }
    }

    static func pool(_ capacity: Int, maker: Maker = Maker(), budget: DecoderBudget? = nil) -> SharedPool<Thing> {
        SharedPool(capacity: capacity, budget: budget, make: { () throws(StenoError) in try maker.make() },
                   isWorn: { $0.worn })
    }

    /// Waits (briefly, polling) for `condition`; false if it did not come.
    static func eventually(_ condition: () -> Bool) -> Bool {
        let deadline = SystemClock.now() + 30
        while !condition() && SystemClock.now() < deadline { usleep(1_000) }
        return condition()
    }

    /// First come, first served: each waiter in line is woken once, with the thing given back.
    @Test func thingsGoToTheWaitersInTheirOrder() throws {
        let pool = Self.pool(1)
        try pool.prepare(count: 1)
        let first = try #require(pool.take(for: PoolWaiter(wake: {})))
        let wakes = [Wakes(), Wakes()]
        let waiters = wakes.map { $0.waiter() }
        for waiter in waiters { #expect(pool.take(for: waiter) == nil) }
        #expect(pool.stats.waiting == 2)
        pool.giveBack(first)
        #expect(wakes.map(\.value) == [1, 0])
        let second = try #require(try waiters[0].take()?.get())
        #expect(second === first && waiters[0].take() == nil)
        pool.giveBack(second)
        #expect(wakes.map(\.value) == [1, 1])
        pool.giveBack(try #require(try waiters[1].take()?.get()))
        #expect(pool.stats == .init(capacity: 1, made: 1, idle: 1, lent: 0, waiting: 0))
    }

    /// One thing, one recognizer at a time: a thing given back twice (or one never lent) is
    /// refused, so the pool never holds it twice and never lends it to two recognizers at once.
    @Test func aThingGivenBackTwiceIsLentToOneRecognizerOnly() throws {
        let pool = Self.pool(2)
        try pool.prepare(count: 2)
        let thing = try #require(pool.take(for: PoolWaiter(wake: {})))
        pool.giveBack(thing)
        pool.giveBack(thing)
        pool.discard(thing)
        #expect(pool.stats == .init(capacity: 2, made: 2, idle: 2, lent: 0, waiting: 0, strayReturns: 2))
        let lent = [pool.take(for: PoolWaiter(wake: {})), pool.take(for: PoolWaiter(wake: {}))].compactMap { $0 }
        #expect(lent.count == 2 && lent[0] !== lent[1])
        pool.giveBack(Thing(99))
        #expect(pool.stats.strayReturns == 3 && pool.stats.lent == 2)
    }

    /// A waiter that withdrew refuses what the pool grants it after, and what was granted and
    /// not taken goes back: nothing stays lent to a recognizer that is gone.
    @Test func aWithdrawnWaiterRefusesAndReturnsWhatItWasGranted() throws {
        let pool = Self.pool(1)
        try pool.prepare(count: 1)
        let lent = try #require(pool.take(for: PoolWaiter(wake: {})))
        let wakes = Wakes()
        let waiter = wakes.waiter()
        #expect(pool.take(for: waiter) == nil)
        pool.giveBack(lent)
        #expect(wakes.value == 1 && pool.stats.lent == 1)
        pool.withdraw(waiter)
        #expect(pool.stats == .init(capacity: 1, made: 1, idle: 1, lent: 0, waiting: 0))
        #expect(!waiter.grant(.success(lent)) && waiter.take() == nil && wakes.value == 1)
    }

    /// Under capacity, a waiter gets one made for it in the background; a failure to make the
    /// only one goes to the waiter, as an error.
    @Test func oneIsMadeForAWaiterAndAFailureReachesIt() throws {
        let maker = Maker()
        let pool = Self.pool(2, maker: maker)
        let wakes = Wakes()
        let waiter = wakes.waiter()
        #expect(pool.take(for: waiter) == nil)
        #expect(Self.eventually { wakes.value == 1 })
        #expect(try waiter.take()?.get().serial == 1)
        #expect(pool.stats == .init(capacity: 2, made: 1, idle: 0, lent: 1, waiting: 0))

        let failing = Maker()
        failing.fails.withLock { $0 = true }
        let broken = Self.pool(1, maker: failing)
        let refused = Wakes()
        let another = refused.waiter()
        #expect(broken.take(for: another) == nil)
        #expect(Self.eventually { refused.value == 1 })
        #expect(throws: StenoError.self) { try another.take()?.get() }
    }

    /// Among idle ones, the most recently given back that the first preference accepts; one
    /// worn out is let go when it comes back, its share of the budget free for a fresh one.
    @Test func preferencesChooseAmongTheIdleAndWornOnesAreReplaced() throws {
        let pool = Self.pool(3)
        try pool.prepare(count: 3)
        let all = (0..<3).compactMap { _ in pool.take(for: PoolWaiter(wake: {})) }
        #expect(all.count == 3)
        for thing in all { pool.giveBack(thing) }
        let odd = try #require(pool.take(for: PoolWaiter(wake: {}), preferring: [{ $0.serial == 7 }, { $0.serial % 2 == 1 }]))
        #expect(odd === all.last(where: { $0.serial % 2 == 1 }))
        pool.giveBack(odd)
        pool.giveBack(try #require(pool.take(for: PoolWaiter(wake: {}), preferring: [{ $0.serial == 2 }])))
        #expect(pool.stats.idle == 3)

        let worn = SharedPool<Thing>(capacity: 1, make: { Thing(1, worn: true) }, isWorn: { $0.worn })
        try worn.prepare(count: 1)
        let budget = worn.stats
        worn.giveBack(try #require(worn.take(for: PoolWaiter(wake: {}))))
        #expect(budget.made == 1 && worn.stats == .init(capacity: 1, made: 0, idle: 0, lent: 0, waiting: 0))
        try worn.prepare(count: 1)
        #expect(worn.stats.made == 1, "its share of the budget came back")
    }

    /// Two pools on one budget: one whose waiter finds the budget spent lets the other's idle
    /// one go and makes its own.
    @Test func poolsOfOneBudgetLendEachOtherTheirShare() throws {
        let budget = DecoderBudget(total: 1)
        let first = Self.pool(1, budget: budget)
        let second = Self.pool(1, budget: budget)
        try first.prepare(count: 1)
        #expect(budget.used == 1)
        let wakes = Wakes()
        let waiter = wakes.waiter()
        #expect(second.take(for: waiter) == nil)
        #expect(Self.eventually { wakes.value == 1 })
        #expect(try waiter.take()?.get() != nil)
        #expect(first.stats.made == 0 && second.stats.made == 1 && budget.used == 1)
    }

    /// `keepReady`: spares are made now and again as they are lent, up to the capacity.
    @Test func sparesAreMadeAgainAsTheyAreLent() throws {
        let pool = Self.pool(3)
        try pool.keepReady(1)
        #expect(pool.stats == .init(capacity: 3, made: 1, idle: 1, lent: 0, waiting: 0))
        let lent = try #require(pool.take(for: PoolWaiter(wake: {})))
        #expect(Self.eventually { pool.stats == .init(capacity: 3, made: 2, idle: 1, lent: 1, waiting: 0) }, "\(pool.stats)")
        pool.giveBack(lent)
        pool.trimIdle(now: SystemClock.now() + pool.idleLifetime)
        #expect(pool.stats == .init(capacity: 3, made: 1, idle: 1, lent: 0, waiting: 0), "one beyond the spare let go")
    }
}

@Suite struct MailboxTests {
    @Test func postsWakeKeepsDoNotAndAClosedMailboxRefuses() {
        let wakes = Locked(0)
        let mailbox = Mailbox<Int>(wake: { wakes.withLock { $0 += 1 } })
        #expect(mailbox.post(1))
        #expect(mailbox.keep(2))
        #expect(wakes.withLock { $0 } == 1)
        #expect(mailbox.collect() == [1, 2] && mailbox.collect() == [])
        mailbox.post(3)
        #expect(mailbox.close() == [3])
        #expect(!mailbox.post(4) && !mailbox.keep(5))
        #expect(mailbox.collect() == [] && wakes.withLock { $0 } == 2)
    }
}

@Suite struct EndpointingDecisionTests {
    /// Late silence ends whatever the words; early silence only when they could end a
    /// sentence, and the language model is asked only then.
    @Test func silenceAfterTheLastWordEndsTheUtterance() {
        let endpointing = Endpointing(earlySilence: 0.2, sentenceEnd: -1, lateSilence: 0.4)
        let asked = Locked(0)
        func ends(_ silence: Double, sentenceEnd: Double) -> Bool {
            endpointing.endsNow(silence: silence) {
                asked.withLock { $0 += 1 }
                return sentenceEnd
            }
        }
        #expect(!ends(0.1, sentenceEnd: 0))
        #expect(asked.withLock { $0 } == 0)
        #expect(ends(0.25, sentenceEnd: -0.5))
        #expect(!ends(0.25, sentenceEnd: -2))
        #expect(ends(0.45, sentenceEnd: -2))
        #expect(asked.withLock { $0 } == 2)
        #expect(!Endpointing.detector.endsUtterances && Endpointing.standard.endsUtterances)
        #expect(!Endpointing.detector.endsNow(silence: 100) { 0 })
    }
}
