import Foundation
import StenoCore
import StenoSystem
import Testing
@testable import StenoSpeech

@Suite struct Determinism {
    /// Chunking cannot change anything: all events (partials and speech times too) are the
    /// same for 20 ms, 1 s and odd-sized chunks.
    @Test func chunkSizeDoesNotMatter() throws {
        let beckett = try TestAudio.load("beckett.wav")
        // The first three utterances (4.6 s), to keep the test quick.
        let audio = TestAudio(name: "beckett, 4.6 s", samples: Array(beckett.samples.prefix(73600)), sampleRate: 16000)
        #expect(try transcribe(audio).finals.count == 3)
        let reference = try transcribe(audio, chunk: 320)
        #expect(try transcribe(audio, chunk: 16000) == reference)
        #expect(try transcribe(audio, chunk: 777) == reference)
    }

    /// A decoder that has run other audio gives a file the same events as a fresh decoder.
    /// An engine of its own with one decoder makes sure the same decoder is reused.
    @Test func sameEventsAfterOtherAudio() throws {
        let engine = try PocketSphinxEngine(configuration: PocketSphinxConfiguration(recognizers: 1))
        let file = try TestAudio.load("cards/005.wav")
        let other = try TestAudio.load("librivox/sense_and_sensibility_01_austen_64kb-0920.wav")
        let fresh = try transcribe(file, with: engine.makeRecognizer())
        _ = try transcribe(other, with: engine.makeRecognizer())
        // A session cancelled in the middle of speech, with an utterance open.
        let cancelled = try engine.makeRecognizer()
        _ = try cancelled.accept(Array(other.floats.prefix(30000)))
        cancelled.cancel()
        let reused = try transcribe(file, with: engine.makeRecognizer())
        #expect(engine.decodersMade == 1)
        #expect(reused == fresh)
        #expect(!fresh.finals.isEmpty)
    }

    /// What carries over between a session's utterances is its own: after other speech in the
    /// same session a file comes out differently (the cepstral mean has moved, which is why it
    /// is the session's to keep), while another session's speech on the same decoder changes
    /// nothing (so the test above tests something).
    @Test func aSessionsMeanCarriesOverItsUtterancesAndNoOneElses() throws {
        let file = try TestAudio.load("cards/002.wav")
        let other = try TestAudio.load("cards/005.wav")
        let alone = try transcribe(file).finals
        let afterOther = try transcribe(other.appending(file)).finals
        #expect(Array(afterOther.suffix(alone.count)) != alone)
    }

    /// Many sessions' speech interleaved through two shared decoders: every session gets
    /// exactly the finals (words, times, confidences) of the same file recognized alone, as
    /// `steno transcribe` recognizes it. Sessions that find no decoder free wait, and go on
    /// when one is given back.
    @Test func pooledDecodersGiveEverySessionTheFinalsOfADecoderOfItsOwn() throws {
        let names = ["beckett.wav", "cards/001.wav", "cards/003.wav", "cards/005.wav",
                     "librivox/sense_and_sensibility_01_austen_64kb-0870.wav",
                     "librivox/sense_and_sensibility_01_austen_64kb-0930.wav"]
        let files = try names.map { try TestAudio.load($0) }
        let alone = try files.map { try transcribe($0).finals }
        let engine = try PocketSphinxEngine(configuration: PocketSphinxConfiguration(recognizers: 2))
        // Each session in turn gets the next 0.1 s of its file (staggered starts).
        let run = try interleave(files, on: engine, staggered: true)
        let (events, waits) = (run.events, run.waits)
        #expect(waits > 0, "with 6 sessions on 2 decoders some had to wait")
        for i in files.indices {
            #expect(events[i].finals == alone[i], "\(names[i])")
        }
        #expect(engine.decoderStats.made <= 2)
        #expect(engine.decoderStats.lent == 0 && engine.decoderStats.waiting == 0, "\(engine.decoderStats)")
    }

    /// The design before shared decoders (kept for the benchmarks): a session keeps its decoder
    /// between utterances, and gets the same finals.
    @Test func aSessionThatKeepsItsDecoderGetsTheSameFinals() throws {
        let engine = try PocketSphinxEngine(configuration: PocketSphinxConfiguration(recognizers: 2))
        let audio = try TestAudio.load("beckett.wav")
        let shared = try transcribe(audio, with: engine.makeRecognizer()).finals
        let keeping = try engine.makeRecognizer(options: RecognizerOptions(keepsDecoder: true))
        let floats = audio.floats
        var events = try keeping.accept(Array(floats.prefix(40000)))
        #expect(!events.finals.isEmpty)
        #expect(engine.load.busy == 1, "kept after its first utterance")
        events += try keeping.accept(Array(floats.dropFirst(40000))) + keeping.finish()
        #expect(events.finals == shared)
        #expect(engine.load.busy == 0)
    }

    /// Sessions on several threads at once get the same results as one alone.
    @Test func concurrentSessionsAreIndependent() async throws {
        let audio = try TestAudio.load("cards/002.wav")
        let alone = try transcribe(audio)
        let results = try await withThrowingTaskGroup(of: [TranscriberEvent].self) { group in
            for _ in 0..<3 {
                group.addTask { try transcribe(audio) }
            }
            return try await group.reduce(into: []) { $0.append($1) }
        }
        #expect(results.count == 3)
        for events in results {
            #expect(events == alone)
        }
    }
}
