import Foundation
import StenoCore
import StenoSystem
import Testing
@testable import StenoSpeech

/// How long one session may keep a shared decoder while others wait for it.
@Suite struct DecoderTurns {
    /// A reader who pauses long enough for the search's end (0.38 s after a word) and too
    /// briefly for the detector's (0.5 s of what it counts as silence): the read sentences of
    /// the labelled set, each trimmed to 0.1 s around its speech, one after another with
    /// 0.2 s of quiet room noise between them. The detector hears one 40 s utterance; the
    /// search ends six.
    static func fluentReader() throws -> TestAudio {
        var state: UInt32 = 7
        func quiet(_ count: Int) -> [Int16] {
            (0..<count).map { _ in
                state = state &* 1_664_525 &+ 1_013_904_223
                return Int16(Int(state >> 16) % 5 - 2)
            }
        }
        var samples = quiet(8000)
        for file in ["0870", "0880", "0890", "0920", "0930", "0870", "0880", "0890"] {
            let audio = try TestAudio.load("librivox/sense_and_sensibility_01_austen_64kb-\(file).wav")
            let loud = audio.samples.indices.filter { abs(Int(audio.samples[$0])) > 1500 }
            let from = max(0, loud.first! - 1600), to = min(audio.samples.count, loud.last! + 1600)
            samples += audio.samples[from..<to]
            samples += quiet(3200)
        }
        samples += quiet(16000)
        return TestAudio(name: "a fluent reader", samples: samples, sampleRate: 16000)
    }

    static func searchEndEngine(recognizers: Int) throws -> PocketSphinxEngine {
        var configuration = PocketSphinxConfiguration(recognizers: recognizers)
        configuration.endpointing = .standard
        return try PocketSphinxEngine(configuration: configuration)
    }

    /// The reader and a talker who starts 3 s later share one decoder, as a server's lanes
    /// would run them (0.1 s of audio each in turn). The talker waits for the reader's first
    /// final, not for the end of its 40 s: the reader gives the decoder up at every final
    /// while someone waits, even though the detector's utterance goes on. And each one's
    /// finals are those it gets alone.
    @Test func aFluentReaderGivesTheDecoderUpAtItsFinalsWhileAnotherWaits() throws {
        let reader = try Self.fluentReader()
        let talker = try TestAudio.load("cards/001.wav")
        let engine = try Self.searchEndEngine(recognizers: 1)
        let flags = [Locked(false), Locked(false)]
        let recognizers = try (0..<2).map { i in try engine.makePocketSphinxRecognizer { flags[i].withLock { $0 = true } } }
        let audio = [reader.floats, talker.floats]
        var offsets = [0, 0]
        var events: [[TranscriberEvent]] = [[], []]
        var finished = [false, false]
        // How much of the reader's audio was analyzed while the talker waited (the longest stretch).
        var waitedFrom: Double?
        var longestWait = 0.0
        var round = 0
        while finished.contains(false) && round < 20_000 {
            round += 1
            for (i, r) in recognizers.enumerated() where !finished[i] && (i == 0 || round > 30) {
                if r.isWaiting {
                    guard flags[i].withLock({ raised in defer { raised = false }; return raised }) else { continue }
                    events[i] += try r.proceed()
                } else if offsets[i] < audio[i].count {
                    let next = min(audio[i].count, offsets[i] + 1600)
                    events[i] += try r.accept(Array(audio[i][offsets[i]..<next]))
                    offsets[i] = next
                } else {
                    events[i] += try r.finish()
                }
                finished[i] = offsets[i] == audio[i].count && !r.isWaiting && r.samplesToNextBlock == nil
            }
            if recognizers[1].isWaiting {
                waitedFrom = waitedFrom ?? recognizers[0].analyzedSeconds
                longestWait = max(longestWait, recognizers[0].analyzedSeconds - waitedFrom!)
            } else {
                waitedFrom = nil
            }
        }
        #expect(round < 20_000, "the sessions got stuck")
        let readerFinals = events[0].finals
        let readerEnds = events[0].filter { if case .speechEnded = $0 { true } else { false } }.count
        #expect(readerFinals.count >= 5 && readerEnds >= 5, "the search ended the reader's sentences: \(readerFinals.map(\.range))")
        // The reader's longest final is under 10 s; the talker waited for one of them at most.
        let longestFinal = readerFinals.map { $0.range.end - $0.range.start }.max() ?? 0
        #expect(longestWait > 0, "the talker had to wait")
        #expect(longestWait <= longestFinal + 1, "the talker waited while the reader analyzed \(longestWait) s")

        let alone = try Self.searchEndEngine(recognizers: 2)
        for (i, audio) in [reader, talker].enumerated() {
            let woken = DispatchSemaphore(value: 0)
            let own = try transcribe(audio, with: alone.makePocketSphinxRecognizer { woken.signal() }, chunk: 1600, woken: woken)
            #expect(events[i].finals == own.finals, "\(audio.name): shared \(events[i].finals) alone \(own.finals)")
        }
    }
}
