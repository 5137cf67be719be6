import Dispatch
import Foundation
import StenoCore
import StenoSystem
import StenoTestSupport
import Testing
@testable import StenoSpeech

// Many recognizers on few shared decoders, from several threads at once, doing everything a
// session can do to its recognizer at random moments: finalize (`endUtterance`), declared
// silence (`skipSilence`), cancel in the middle of an utterance, a vocabulary of its own,
// n-best alternatives, a short length limit, a kept decoder, the search's endpointing. The
// pool and the recognizer must never hand one decoder to two threads, never lose one, and
// pocketsphinx must never abort (a crash in a server takes every session down).
//
// `STENO_STRESS_SECONDS` runs it longer (the default run is short); `STENO_STRESS_TRACE=DIR`
// writes every thread's operations to DIR/thread-N.txt, flushed before each one, so that an
// abort can be traced to the calls that led to it.

@Suite struct PoolStress {
    static let seconds = ProcessInfo.processInfo.environment["STENO_STRESS_SECONDS"].flatMap(Double.init) ?? 5
    static let traceDirectory = ProcessInfo.processInfo.environment["STENO_STRESS_TRACE"]

    /// With Steno's decoder options and with pocketsphinx's own (`-fwdflat yes`: a second pass
    /// at the end of each utterance), each with the detector's endpoints and the search's.
    @Test(arguments: [false, true], [false, true])
    func sharedDecodersSurviveEverythingASessionDoes(pocketsphinxDefaults: Bool, searchEndpointing: Bool) throws {
        var configuration = PocketSphinxConfiguration(recognizers: 2, preparedRecognizers: 2)
        if pocketsphinxDefaults { configuration.arguments = [] }
        if searchEndpointing { configuration.endpointing = .standard }
        let name = (pocketsphinxDefaults ? "defaults" : "steno") + (searchEndpointing ? "-search" : "-detector")
        let engine = try PocketSphinxEngine(configuration: configuration)
        let audio = try testFiles.map { try TestAudio.load($0).floats }
        let failures = Locked<[String]>([])
        let sessions = Locked(0)
        let deadline = SystemClock.now() + Self.seconds
        let threads = 4
        let group = DispatchGroup()
        for thread in 0..<threads {
            group.enter()
            Thread {
                defer { group.leave() }
                var random = SplitMix(seed: UInt64(thread * 7919 + (searchEndpointing ? 1 : 0) + (pocketsphinxDefaults ? 2 : 0)))
                let trace = Self.traceDirectory.flatMap { Trace(path: "\($0)/\(name)-\(thread).txt") }
                while SystemClock.now() < deadline {
                    do {
                        try Self.runSession(engine: engine, audio: audio, random: &random, trace: trace)
                        sessions.withLock { $0 += 1 }
                    } catch {
                        failures.withLock { $0.append("thread \(thread): \(error)") }
                        return
                    }
                }
            }.start()
        }
        #expect(group.wait(timeout: .now() + Self.seconds + 300) == .success, "a session got stuck")
        #expect(failures.withLock { $0 } == [])
        #expect(sessions.withLock { $0 } >= threads)
        // Every decoder came back: none lent, none lost to a session that went away.
        let stats = engine.decoderStats
        #expect(stats.lent == 0 && stats.waiting == 0, "\(stats)")
        #expect(stats.idle == stats.made, "\(stats)")
    }

    /// One session on one recognizer: a file in random chunks with random operations between
    /// them; its finals must come in order and never overlap.
    static func runSession(engine: PocketSphinxEngine, audio: [[Float]], random: inout SplitMix, trace: Trace?) throws {
        let woken = DispatchSemaphore(value: 0)
        var options = RecognizerOptions()
        options.volatileResults = random.next() % 4 != 0
        if random.next() % 4 == 0 {
            // Half of them with a word of their own, which rebuilds the search's lexicon tree.
            options.vocabulary = try Vocabulary(
                phrases: ["John Dashwood", "prudently", "ill disposed", "Tesseract"],
                pronunciations: random.next() % 2 == 0 ? [(word: "Tesseract", phones: "T EH S ER AE K T")] : [])
        }
        if random.next() % 4 == 0 { options.alternatives = 3 }
        if random.next() % 6 == 0 { options.maxUtteranceSeconds = 1.5 }
        if random.next() % 8 == 0 { options.keepsDecoder = true }
        let file = Int(random.next() % UInt64(audio.count))
        trace?.write("session file \(file) vocabulary \(options.vocabulary != nil) alternatives \(options.alternatives) max \(options.maxUtteranceSeconds ?? 0) keeps \(options.keepsDecoder)")
        let recognizer = try engine.makePocketSphinxRecognizer(options: options) { woken.signal() }
        var events: [TranscriberEvent] = []
        func settle() throws {
            while recognizer.isWaiting {
                guard woken.wait(timeout: .now() + 120) == .success else {
                    throw TestDataError("a recognizer waited for a decoder and was not woken")
                }
                trace?.write("proceed")
                events += try recognizer.proceed()
            }
        }
        let samples = audio[file]
        let chunks = [160, 320, 1000, 2048, 4096, 7777]
        var offset = 0
        var cancelled = false
        while offset < samples.count {
            let end = min(samples.count, offset + chunks[Int(random.next() % UInt64(chunks.count))])
            trace?.write("accept \(offset)..<\(end)")
            events += try recognizer.accept(Array(samples[offset..<end]))
            try settle()
            offset = end
            switch random.next() % 100 {
            case 0..<3:
                trace?.write("endUtterance")
                events += try recognizer.endUtterance()
                try settle()
            case 3..<5:
                let silence = 160 * Int(1 + random.next() % 200)
                trace?.write("skipSilence \(silence)")
                events += try recognizer.skipSilence(silence)
                try settle()
            case 5:
                trace?.write("cancel")
                recognizer.cancel()
                cancelled = true
            default:
                break
            }
            if cancelled { break }
        }
        if !cancelled {
            trace?.write("finish")
            events += try recognizer.finish()
            try settle()
        }
        trace?.write("done")
        let finals = events.finals
        for (before, after) in zip(finals, finals.dropFirst()) where after.range.start < before.range.end - 1e-9 {
            throw TestDataError("finals out of order or overlapping: \(before.range) then \(after.range)")
        }
    }

    /// One thread's operations, each line flushed before the operation runs.
    final class Trace {
        let handle: FileHandle
        init?(path: String) {
            guard FileManager.default.createFile(atPath: path, contents: nil), let handle = FileHandle(forWritingAtPath: path) else { return nil }
            self.handle = handle
        }
        func write(_ line: String) {
            handle.write(Data((line + "\n").utf8))  // a write(2): kept if the process aborts
        }
    }
}

/// The pool's line, one step at a time, with real decoders.
@Suite struct DecoderPoolLine {
    final class Counter: Sendable {
        let count = Locked(0)
    }

    /// A pool of one decoder lent to a first waiter, and a second waiter in line for it
    /// (counting its wake-ups).
    static func lentWithOneInLine() throws -> (pool: DecoderPool, decoder: PocketSphinxDecoder, second: DecoderWaiter, woken: Counter) {
        let pool = DecoderPool(arguments: PocketSphinxConfiguration().decoderArguments, capacity: 1)
        try pool.prepare(count: 1)
        let decoder = try #require(pool.take(for: DecoderWaiter(wake: {})))
        let woken = Counter()
        let second = DecoderWaiter(wake: { woken.count.withLock { $0 += 1 } })
        #expect(pool.take(for: second) == nil)
        #expect(pool.stats.waiting == 1)
        return (pool, decoder, second, woken)
    }

    static let allIdle = DecoderPool.Stats(capacity: 1, made: 1, idle: 1, lent: 0, waiting: 0)

    /// The pool takes a waiter out of its line under its lock and grants it the decoder after:
    /// a recognizer that ends in between must refuse it, or the decoder would stay lent for ever.
    @Test func aWaiterThatWithdrewRefusesAGrant() throws {
        let (pool, decoder, second, woken) = try Self.lentWithOneInLine()
        pool.withdraw(second)
        #expect(!second.grant(.success(decoder)))
        #expect(second.take() == nil)
        #expect(woken.count.withLock { $0 } == 0)
        pool.giveBack(decoder)
        #expect(pool.stats == Self.allIdle)
    }

    /// A decoder granted to a waiter that then withdraws without taking it goes back idle.
    @Test func aGrantNotTakenGoesBackOnWithdrawal() throws {
        let (pool, decoder, second, woken) = try Self.lentWithOneInLine()
        pool.giveBack(decoder)
        #expect(woken.count.withLock { $0 } == 1)
        #expect(pool.stats.lent == 1 && pool.stats.waiting == 0)
        pool.withdraw(second)
        #expect(pool.stats == Self.allIdle)
    }

    /// Spares: `keepReady(2)` makes two decoders, not the capacity; each lend has another made
    /// in the background so that two stay idle, until the capacity is reached; none is made
    /// while they come back. Memory follows the utterances recognized at once, plus two.
    @Test func sparesAreKeptReadyAsTheyAreLentUpToTheCapacity() throws {
        let pool = DecoderPool(arguments: PocketSphinxConfiguration().decoderArguments, capacity: 4)
        try pool.keepReady(2)
        #expect(pool.stats == DecoderPool.Stats(capacity: 4, made: 2, idle: 2, lent: 0, waiting: 0))
        func settled(_ expected: DecoderPool.Stats) -> Bool {
            let deadline = SystemClock.now() + 60
            while pool.stats != expected && SystemClock.now() < deadline { usleep(10_000) }
            return pool.stats == expected
        }
        var lent: [PocketSphinxDecoder] = []
        for (made, idle) in [(3, 2), (4, 2), (4, 1), (4, 0)] {
            lent.append(try #require(pool.take(for: DecoderWaiter(wake: {}))))
            #expect(settled(DecoderPool.Stats(capacity: 4, made: made, idle: idle, lent: lent.count, waiting: 0)), "\(pool.stats)")
        }
        #expect(pool.take(for: DecoderWaiter(wake: {})) == nil, "the capacity is reached: in line")
        for decoder in lent { pool.giveBack(decoder) }
        #expect(pool.stats.made == 4 && pool.stats.lent == 1 && pool.stats.waiting == 0, "the one in line got one: \(pool.stats)")
    }

    /// After a peak: decoders idle for the pool's lifetime beyond the spares are let go, and
    /// the budget they leave makes new ones when speech needs them again.
    @Test func decodersIdleLongBeyondTheSparesAreLetGo() throws {
        let pool = DecoderPool(arguments: PocketSphinxConfiguration().decoderArguments, capacity: 3, idleLifetime: 60)
        try pool.keepReady(1)
        let lent = try (0..<3).map { _ in try Self.lend(pool) }
        for decoder in lent { pool.giveBack(decoder) }
        #expect(pool.stats == DecoderPool.Stats(capacity: 3, made: 3, idle: 3, lent: 0, waiting: 0))
        pool.trimIdle()
        #expect(pool.stats.made == 3, "not idle long enough yet")
        pool.trimIdle(now: SystemClock.now() + 61)
        #expect(pool.stats == DecoderPool.Stats(capacity: 3, made: 1, idle: 1, lent: 0, waiting: 0), "the spare stays")
        // Their share of the budget is back: two talkers at once get another made.
        let again = try (0..<2).map { _ in try Self.lend(pool) }
        #expect(pool.stats.made >= 2 && pool.stats.lent == 2, "\(pool.stats)")
        for decoder in again { pool.giveBack(decoder) }
    }

    /// A decoder for a new waiter: an idle one, or the one granted to it once made.
    static func lend(_ pool: DecoderPool) throws -> PocketSphinxDecoder {
        let woken = Counter()
        let waiter = DecoderWaiter(wake: { woken.count.withLock { $0 += 1 } })
        if let decoder = pool.take(for: waiter) { return decoder }
        let deadline = SystemClock.now() + 60
        while woken.count.withLock({ $0 }) == 0 && SystemClock.now() < deadline { usleep(10_000) }
        return try #require(waiter.take()).get()
    }
}

/// A decoder that comes back to the pool in the middle of an utterance (its session was
/// cancelled while speaking) and is then lent to a session whose vocabulary rebuilds the
/// search: the rebuild must not happen under the abandoned utterance.
@Suite struct AbandonedUtterance {
    @Test func aCancelledUtteranceThenAVocabularyThatRebuildsTheSearch() throws {
        let engine = try PocketSphinxEngine(configuration: PocketSphinxConfiguration(recognizers: 1, preparedRecognizers: 1))
        let speech = try TestAudio.load(PhraseTests.dashwood).floats
        let plain = try TestAudio.load(PhraseTests.illDisposed)
        let reference = try transcribe(plain, with: engine.makePocketSphinxRecognizer(), woken: nil)
        for round in 0..<3 {
            // Halfway through a sentence: the decoder is in an utterance, and goes back.
            let cancelled = try engine.makePocketSphinxRecognizer()
            _ = try cancelled.accept(Array(speech[0..<(speech.count / 2 + round * 3000)]))
            #expect(engine.decoderStats.lent == 1)
            cancelled.cancel()
            #expect(engine.decoderStats.idle == 1)
            // New words (their own dictionary entries): the lexicon tree is rebuilt.
            let named = try engine.makePocketSphinxRecognizer(options: PhraseTests.options(
                ["John Dashwode", "Tesseract"], pronunciations: [("Dashwode", "D AE SH W UH D"), ("Tesseract", "T EH S ER AE K T")]))
            let heard = try transcribe(try TestAudio.load(PhraseTests.dashwood), with: named, woken: nil)
            #expect(!heard.finals.isEmpty)
            // And back to the model's own vocabulary: rebuilt again, the same words as ever.
            let again = try transcribe(plain, with: engine.makePocketSphinxRecognizer(), woken: nil)
            #expect(again.finals.map(\.text) == reference.finals.map(\.text))
        }
    }
}
