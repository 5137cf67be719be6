import Foundation
import StenoCore
import StenoSystem
import Testing
@testable import StenoSpeech

/// The search's end of an utterance (Endpointing.swift) against the speech detector's alone,
/// on real speech: times are audio times, so these are facts about the audio, not timings.
@Suite struct EndpointingTests {
    /// Steno's default options with the search's end (`Endpointing.standard`).
    static let withSearchEnd = Locked<PocketSphinxEngine?>(nil)

    static func searchEndEngine() throws -> PocketSphinxEngine {
        try withSearchEnd.withLock { engine in
            if let engine { return engine }
            var configuration = PocketSphinxConfiguration(recognizers: 4)
            configuration.endpointing = .standard
            let made = try PocketSphinxEngine(configuration: configuration)
            engine = made
            return made
        }
    }

    static func run(_ file: String, on engine: PocketSphinxEngine) throws -> (events: [TranscriberEvent], silences: [Double]) {
        let woken = DispatchSemaphore(value: 0)
        let recognizer = try engine.makePocketSphinxRecognizer { woken.signal() }
        let audio = try TestAudio.load(file)
        // A second of quiet room noise (±2 of 16 bits) after the sentence, so that the
        // detector, too, ends it.
        var state: UInt32 = 15
        let quiet = (0..<16000).map { _ -> Int16 in
            state = state &* 1_664_525 &+ 1_013_904_223
            return Int16(Int(state >> 16) % 5 - 2)
        }
        let events = try transcribe(audio.appending(TestAudio(name: "1 s of quiet", samples: quiet, sampleRate: 16000)),
                                    with: recognizer, woken: woken)
        var silences: [Double] = []
        if let timing = recognizer.lastUtteranceTiming, let decided = timing.detectorDecidedAt, let last = events.finals.last {
            silences.append(decided - last.range.end)
        }
        return (events, silences)
    }

    static let sentences = [
        "librivox/sense_and_sensibility_01_austen_64kb-0890.wav",  // "unless to be rather cold hearted, and rather selfish, ..."
        "librivox/sense_and_sensibility_01_austen_64kb-0930.wav",  // the detector's longest wait of the set
    ]

    /// A read sentence's final comes after a shorter silence than the detector's wait, with
    /// the same words; the speech ends with it, so readable text ends the sentence there.
    @Test(arguments: sentences)
    func aSentencesFinalComesAfterAShorterSilence(file: String) throws {
        let early = try Self.run(file, on: Self.searchEndEngine())
        let detector = try Self.run(file, on: SharedEngine.get())
        #expect(early.events.finals.map(\.text) == detector.events.finals.map(\.text))
        let silence = try #require(early.silences.first)
        let waited = try #require(detector.silences.first)
        // The detector waits `-vad_postspeech` (0.5 s) and more; the search's end comes at the
        // first block whose best path has been quiet 0.38 s after its last word.
        #expect(waited >= 0.45)
        #expect(silence < waited)
        #expect(silence <= 0.38 + 0.128 + 0.05)
        let events = early.events
        let finalAt = try #require(events.firstIndex(where: { if case .final = $0 { return true } else { return false } }))
        #expect(finalAt + 1 < events.count)
        if finalAt + 1 < events.count, case .speechEnded(let at) = events[finalAt + 1] {
            #expect(at == events.finals[0].range.end)
        } else {
            Issue.record("the final is not followed by the end of speech")
        }
        #expect(events.speech.map(\.started) == [true, false])
    }

    /// The pauses at the commas of a read sentence do not split it: one final, as with the
    /// detector alone. They are pauses the search sees (an earlier end, after 0.15 s of
    /// silence, does split the sentence there).
    @Test func aCommaPauseDoesNotSplitTheSentence() throws {
        let file = Self.sentences[0]
        let finals = try Self.run(file, on: Self.searchEndEngine()).events.finals
        #expect(finals.count == 1)
        var hasty = PocketSphinxConfiguration(recognizers: 1)
        hasty.endpointing = Endpointing(lateSilence: 0.15)
        let split = try Self.run(file, on: PocketSphinxEngine(configuration: hasty)).events.finals
        #expect(split.count > 1)
    }
}
