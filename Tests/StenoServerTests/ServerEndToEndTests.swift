import Foundation
import StenoAudio
import StenoCore
import StenoTestSupport
import Testing
@testable import StenoServer

/// The inputs of the format test, made once.
enum FormatInputs {
    static let pcm16k = TestInput.pcm16k()
    static let pcm24k = TestInput(name: "endgame 24k", format: .pcm(24000),
                                  messages: Speech.pcmMessages(Speech.endgame24k, rate: 24000))
    static let pcm44k = TestInput(name: "beckett 44.1k", format: .pcm(44100),
                                  messages: Speech.pcmMessages(Speech.resample(Speech.beckett16k, from: 16000, to: 44100), rate: 44100))
    static let opus48k = TestInput(name: "beckett opus 48k", format: .pcm(48000, encoding: .opus),
                                   messages: Speech.opusPackets(Speech.resample(Speech.beckett16k, from: 16000, to: 48000)))

    static func named(_ name: String) -> TestInput {
        switch name {
        case "pcm_s16le 16 kHz": pcm16k
        case "pcm_s16le 24 kHz": pcm24k
        case "pcm_s16le 44.1 kHz": pcm44k
        default: opus48k
        }
    }
}

/// Whole sessions over real sockets with real speech: the words, the times and the event
/// stream are what the same machine and pipeline give when run locally on the same bytes.
@Suite struct ServerEndToEndTests {
    @Test(arguments: ["pcm_s16le 16 kHz", "pcm_s16le 24 kHz", "pcm_s16le 44.1 kHz", "opus 48 kHz"])
    func sessionsGiveTheWordsLocalSessionGives(_ name: String) throws {
        let input = FormatInputs.named(name)
        let server = try LiveServer()
        let client = try StenoClient.transcribe(input, on: server)

        expectEndedNormally(client, audio: input.duration, name)
        let ready = try #require(client.events.first)
        #expect(ready.string("session")?.isEmpty == false)
        #expect(ready.string("startedAt")?.wholeMatch(of: /\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z/) != nil, "\(ready)")

        let expected = Reference.finals(input)
        #expect(!expected.isEmpty)
        #expect(client.events.finals == expected, "\(name): server \(client.events.finals) local \(expected)")
        if input.format.encoding == .opus {
            let original = Reference.finals(FormatInputs.pcm16k).flatMap { $0.text.split(separator: " ").map(String.init) }
            let overlap = wordOverlap(client.events.finalWords, original)
            #expect(overlap >= 0.6, "opus \(client.events.finalWords) against PCM \(original): \(overlap)")
        }
        if input.name.hasPrefix("beckett") && input.format != FormatInputs.pcm16k.format {
            // The same speech at another rate or through Opus: the words the two hear alike
            // are reported at the same times (resampling and decoding must not shift the timeline).
            let here = client.events.finals.flatMap(\.words)
            let there = Reference.finals(FormatInputs.pcm16k).flatMap(\.words)
            var matched = 0
            var j = 0
            for word in here {
                guard let k = there[j...].firstIndex(where: { $0.word == word.word && abs($0.start - word.start) < 0.5 }) else { continue }
                #expect(abs(there[k].start - word.start) <= 0.02, "\(name): \(word.word) at \(word.start), at 16 kHz \(there[k].start)")
                matched += 1
                j = k + 1
            }
            #expect(matched >= there.count / 2, "\(name): only \(matched) words in common")
        }
    }

    @Test func theWordsDoNotDependOnHowTheAudioIsCarried() throws {
        // The Endgame line as 100 ms mono s16le messages is the reference; the same samples in
        // messages of random sizes, as stereo, and as 32-bit floats give the same finals.
        let reference = FormatInputs.pcm24k
        let samples = Speech.endgame24k
        var generator = SplitMix(seed: 0xC0FFEE)
        let bytes = reference.messages.flatMap { $0 }
        var cuts: [[UInt8]] = []
        var at = 0
        while at < bytes.count {
            let size = 2 * Int(1 + generator.next() % 4000)
            cuts.append(Array(bytes[at..<min(bytes.count, at + size)]))
            at += size
        }
        let variants = [
            TestInput(name: "random message sizes", format: reference.format, messages: cuts),
            TestInput(name: "stereo", format: .pcm(24000, channels: 2),
                      messages: Speech.split(WAVFile(sampleRate: 24000, channels: 2, samples: samples.flatMap { [$0, $0] }).s16leBytes,
                                             every: 9600)),
            TestInput(name: "pcm_f32le", format: .pcm(24000, encoding: .pcmF32LE),
                      messages: Speech.split(WAVFile(sampleRate: 24000, channels: 1, samples: samples).f32leBytes, every: 9600)),
        ]
        let server = try LiveServer()
        for input in variants {
            let client = try StenoClient.transcribe(input, on: server)
            expectEndedNormally(client, audio: reference.duration, input.name)
            #expect(client.events.finals == Reference.finals(reference), "\(input.name)")
        }
    }

    @Test func withoutVolatileAndWordsOnlyFinalsWithoutWordsArrive() throws {
        let input = FormatInputs.pcm24k
        let server = try LiveServer()
        let client = try StenoClient.transcribe(input, on: server, extra: #""volatile":false,"words":false"#)
        expectEndedNormally(client, audio: input.duration)
        #expect(!client.events.types.contains("volatile"))
        #expect(client.events.filter { $0.type == "final" }.allSatisfy { $0.object["words"] == nil })
        let strip = { (r: TestResult) in TestResult(start: r.start, end: r.end, text: r.text, words: []) }
        #expect(client.events.finals.map(strip) == Reference.finals(input).map(strip))
    }

    @Test func finalizeMidSpeechDeliversItsFinalsFirstAndTheSessionGoesOn() throws {
        let input = TestInput.pcm16k()
        // 5.2 s is inside "try again" (4.85–5.49 s).
        let (before, after, cut) = input.split(at: 5.2)
        #expect(abs(cut - 5.2) < 1e-9)
        let server = try LiveServer()
        let client = try server.connect()
        try client.start(input)
        try client.send(audio: before, of: input)
        try client.send(#"{"type":"finalize"}"#)
        let finalized = try client.waitFor("finalized")
        #expect(abs((finalized.number("through") ?? -1) - cut) <= 0.001, "\(finalized)")
        let beforeFinalized = client.events.finals
        let last = try #require(beforeFinalized.last, "no final before \(finalized)")
        // The utterance in progress became final: it ends in the speech before the cut.
        #expect(last.end > 4.85 && last.end <= cut + 0.0015, "\(last)")

        try client.send(audio: after, of: input)
        try client.end()
        expectEndedNormally(client, audio: input.duration)
        let finalizedIndex = try #require(client.events.index(of: "finalized"))
        let later = client.events[(finalizedIndex + 1)...].filter { $0.type == "final" }.compactMap(\.result)
        #expect(!later.isEmpty, "no final after the finalize")
        #expect(later.allSatisfy { $0.start >= cut - 0.0015 }, "\(later)")
        // Exactly what the local session gives for the same messages with the same finalize.
        let reference = Reference.events(input, finalizeAt: [(before.count, #"{"type":"finalize"}"#)])
        #expect(client.events.finals == reference.finals)
        #expect(reference.first("finalized")?.number("through") == finalized.number("through"))
    }

    @Test func audioThatStopsMidSpeechIsFinalAfterTheStallAndTheSessionGoesOn() throws {
        let input = TestInput.pcm16k()
        // 5.2 s is inside "try again" (4.85–5.49 s); then nothing comes for a while.
        let (before, after, _) = input.split(at: 5.2)
        let server = try LiveServer { $0.limits.stallSeconds = 0.5 }
        let client = try server.connect()
        try client.start(input)
        try client.send(audio: before, of: input)
        // No finalize from the client: the server finalizes what it heard.
        #expect(eventually(timeout: 60) { (try? client.readAvailable()) != nil && client.events.finals.last.map { $0.end > 4.85 } == true },
                "\(client.events.finals)")
        #expect(client.events.first("finalized") == nil, "a stall is not the client's finalize")
        #expect(eventually(timeout: 10) { server.server.metrics.stalledUtterances.value == 1 })

        try client.send(audio: after, of: input)
        try client.end()
        expectEndedNormally(client, audio: input.duration)
        // The words of a finalize at the same place.
        let reference = Reference.events(input, finalizeAt: [(before.count, #"{"type":"finalize"}"#)])
        #expect(client.events.finals == reference.finals)
    }

    @Test func finalizeThroughAnEarlierTimeCutsThereAndRecognizesTheRestAgain() throws {
        let input = TestInput.pcm16k()
        // At 6.2 s the utterance "try again <pause> fail again" is open; cut it after "again".
        let (before, after, sent) = input.split(at: 6.2)
        let message = #"{"type":"finalize","through":5.5}"#
        let server = try LiveServer()
        let client = try server.connect()
        try client.start(input)
        try client.send(audio: before, of: input)
        try client.send(message)
        let finalized = try client.waitFor("finalized")
        #expect(finalized.number("through") == 5.5, "\(finalized) after \(sent) s")
        let made = try #require(client.events.finals.last, "no final before \(finalized)")
        #expect(made.start < 5.5 && made.end >= 5.5 - 0.0015, "\(made)")

        try client.send(audio: after, of: input)
        try client.end()
        expectEndedNormally(client, audio: input.duration)
        let finalizedIndex = try #require(client.events.index(of: "finalized"))
        let later = client.events[(finalizedIndex + 1)...].filter { $0.type == "final" }.compactMap(\.result)
        #expect(!later.isEmpty)
        #expect(later.allSatisfy { $0.start >= made.end - 0.0015 }, "\(later)")
        let reference = Reference.events(input, finalizeAt: [(before.count, message)])
        #expect(client.events.finals == reference.finals)
    }

    @Test func cancelMidUtteranceSendsOnlyCancelledThenClosesAndTheServerGoesOn() throws {
        let input = TestInput.pcm16k()
        let (before, _, sent) = input.split(at: 5.2)
        let server = try LiveServer()
        let client = try server.connect()
        try client.start(input)
        try client.send(audio: before, of: input)
        try client.send(#"{"type":"cancel"}"#)
        try client.readUntilClose()

        let cancelled = try #require(client.events.last)
        #expect(cancelled.type == "cancelled", "\(client.events.types)")
        let through = cancelled.number("through") ?? -1
        #expect(through >= 0 && through <= sent + 0.0015, "\(cancelled)")
        #expect(client.events.filter { $0.type == "cancelled" }.count == 1)
        #expect(!client.events.types.contains("ended") && client.events.errors.isEmpty, "\(client.events.types)")
        #expect(client.closeCode == 1000)
        expectWellFormed(client.events, audio: sent)

        // The session is gone and the server works as before.
        #expect(eventually { server.server.sessionCount == 0 })
        let next = try StenoClient.transcribe(input, on: server)
        expectEndedNormally(next, audio: input.duration)
        #expect(next.events.finals == Reference.finals(input))
    }
}
