import Testing
@testable import StenoCore

/// Every server event read back from the JSON it is written as: one type owns both directions
/// (the clients and the channels' relay read events with `ServerEvent(wire:)`).
@Suite struct ServerEventDecodingTests {
    static let start = UTCTime(millisecondsSince1970: 1_765_000_000_123)
    static let result = RecognitionResult(range: TimeRange(start: 1.25, end: 2.5), text: "Hello there.",
                                          words: [Word("Hello", range: TimeRange(start: 1.25, end: 1.7), confidence: 0.912),
                                                  Word("there.", range: TimeRange(start: 1.8, end: 2.5), confidence: 0.5)],
                                          language: "en")

    static let events: [ServerEvent] = [
        .ready(ReadyInfo(session: "abc", startedAt: start, engine: EngineInfo(name: "whisper", model: "whisper-tiny.en",
                                                                              language: "en", sampleRate: 16_000),
                         limits: SessionLimits(), resumeToken: "token")),
        .ready(ReadyInfo(session: "abc", startedAt: start, engine: EngineInfo(name: "pocketsphinx", model: "en-us",
                                                                              language: "en-US", sampleRate: 16_000),
                         limits: SessionLimits(maxSessionSeconds: 0, resumeSeconds: 0))),
        .volatile(result, includeWords: true), .final(result, includeWords: true),
        .speech(.started, at: 0.5), .speech(.ended, at: 2.75), .progress(received: 3, analyzed: 2.5),
        .finalized(through: 2.5), .ended(duration: 3.25), .cancelled(through: 1),
        .error(StenoError(.badAudio, "a bad packet")), .error(StenoError(.idle, "no audio for 30 s")),
        .lowConfidence(TimeRange(start: 1, end: 2), scores: [LanguageScore(language: "ru", probability: 0.04)]),
        .joined(channel: "studio", startedAt: start), .resumed(session: "abc", received: 12.5),
        .gap(start: 3, end: 4.5), .publisher(.lost, broadcast: "b1", startedAt: start), .relay(up: false),
    ]

    @Test(arguments: events) func readsBackWhatItWrites(_ event: ServerEvent) throws {
        guard case .object(let object) = try JSONParser().parse(event.encoded(seq: 7).bytes) else {
            Issue.record("not an object"); return
        }
        #expect(ServerEvent(wire: object) == event)
    }

    @Test func aResultWithoutWordsSaysSoAndBrokenEventsAreNotRead() throws {
        let plain = ServerEvent.final(Self.result, includeWords: false)
        guard case .object(let object) = try JSONParser().parse(plain.encoded().bytes) else { return }
        var withoutWords = Self.result
        withoutWords.words = []
        #expect(ServerEvent(wire: object) == .final(withoutWords, includeWords: false))
        for broken in [#"{"type":"progress","received":"1","analyzed":0}"#, #"{"type":"error","code":"nope","message":"x"}"#,
                       #"{"type":"speech","state":"maybe","at":1}"#, #"{"type":"mystery"}"#] {
            guard case .object(let o) = try JSONParser().parse(broken) else { continue }
            #expect(ServerEvent(wire: o) == nil, "\(broken)")
        }
    }
}
