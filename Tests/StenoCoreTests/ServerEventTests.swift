import Testing
@testable import StenoCore

let testEngine = EngineInfo(name: "pocketsphinx", model: "en-us", language: "en-US", sampleRate: 16000)

func result(_ start: Double, _ end: Double, _ text: String, _ words: [Word] = []) -> RecognitionResult {
    RecognitionResult(range: TimeRange(start: start, end: end), text: text, words: words)
}

func word(_ text: String, _ start: Double, _ end: Double, _ confidence: Double = 0.9) -> Word {
    Word(text, range: TimeRange(start: start, end: end), confidence: confidence)
}

@Suite struct ServerEventEncodingTests {
    @Test func ready() {
        let info = ReadyInfo(session: "s-1", startedAt: UTCTime(millisecondsSince1970: 1_741_356_309_042),
                             engine: testEngine, limits: SessionLimits())
        #expect(ServerEvent.ready(info).encoded(seq: 1).text == """
            {"type":"ready","seq":1,"session":"s-1","startedAt":"2025-03-07T14:05:09.042Z",\
            "engine":{"name":"pocketsphinx","model":"en-us","language":"en-US","sampleRate":16000},\
            "limits":{"maxFrameBytes":65536,"bufferSeconds":10,"maxSessionSeconds":14400,\
            "idleTimeoutSeconds":30,"outboundBytes":1048576,"resumeSeconds":30}}
            """)
    }

    @Test func volatileAndFinalWithAndWithoutWords() {
        let r = result(1.2, 2.4800000000000004, "hello wor", [word("hello", 1.24, 1.6, 0.93), word("wor", 1.6, 2.48, 0.5)])
        #expect(ServerEvent.volatile(r, includeWords: true).encoded(seq: 7).text == """
            {"type":"volatile","seq":7,"start":1.2,"end":2.48,"text":"hello wor","words":[\
            {"word":"hello","start":1.24,"end":1.6,"confidence":0.93},\
            {"word":"wor","start":1.6,"end":2.48,"confidence":0.5}]}
            """)
        #expect(ServerEvent.final(r, includeWords: false).encoded(seq: 8).text
            == #"{"type":"final","seq":8,"start":1.2,"end":2.48,"text":"hello wor"}"#)
        #expect(ServerEvent.final(result(0, 0, ""), includeWords: true).encoded(seq: 2).text
            == #"{"type":"final","seq":2,"start":0,"end":0,"text":"","words":[]}"#)
    }

    @Test func confidencesAreClamped() {
        let r = result(0, 1, "a", [word("a", 0, 1, 1.7), word("b", 0, 1, -0.2), word("c", 0, 1, .nan)])
        let text = ServerEvent.final(r, includeWords: true).encoded(seq: 1).text
        #expect(text.contains(#""confidence":1}"#))
        #expect(text.contains(#""confidence":0}"#))
    }

    @Test func controlEvents() {
        #expect(ServerEvent.speech(.started, at: 0.5).encoded(seq: 2).text
            == #"{"type":"speech","seq":2,"state":"started","at":0.5}"#)
        #expect(ServerEvent.speech(.ended, at: 3).encoded(seq: 3).text
            == #"{"type":"speech","seq":3,"state":"ended","at":3}"#)
        #expect(ServerEvent.progress(received: 12.345, analyzed: 11.1).encoded(seq: 4).text
            == #"{"type":"progress","seq":4,"received":12.345,"analyzed":11.1}"#)
        #expect(ServerEvent.finalized(through: 4.2).encoded(seq: 5).text
            == #"{"type":"finalized","seq":5,"through":4.2}"#)
        #expect(ServerEvent.ended(duration: 61.02).encoded(seq: 6).text
            == #"{"type":"ended","seq":6,"duration":61.02}"#)
        #expect(ServerEvent.cancelled(through: 0).encoded(seq: 7).text
            == #"{"type":"cancelled","seq":7,"through":0}"#)
        #expect(ServerEvent.joined(channel: "studio-a", startedAt: UTCTime(millisecondsSince1970: 0)).encoded(seq: 1).text
            == #"{"type":"joined","seq":1,"channel":"studio-a","startedAt":"1970-01-01T00:00:00.000Z"}"#)
    }

    @Test func errorsSayWhetherFatal() {
        #expect(ServerEvent.error(StenoError(.badAudio, "x \"y\"")).encoded(seq: 9).text
            == #"{"type":"error","seq":9,"code":"bad_audio","message":"x \"y\"","fatal":false}"#)
        #expect(ServerEvent.error(StenoError(.idle, "z")).encoded(seq: 10).text
            == #"{"type":"error","seq":10,"code":"idle","message":"z","fatal":true}"#)
    }

    @Test func textIsEscaped() {
        let text = ServerEvent.final(result(0, 1, "say \"hi\"\n\u{1}é"), includeWords: false).encoded(seq: 1).text
        #expect(text.contains(#""text":"say \"hi\"\n\u0001é""#))
    }

    @Test func everyEncodingIsValidJSONWithTypeAndSeq() throws {
        let events: [ServerEvent] = [
            .ready(ReadyInfo(session: "é\"", startedAt: UTCTime(millisecondsSince1970: 5), engine: testEngine,
                             limits: SessionLimits(bufferSeconds: 2.5))),
            .volatile(result(0, 1, "a", [word("a", 0, 1)]), includeWords: true),
            .final(result(0, 1, "a"), includeWords: false), .speech(.started, at: 1), .progress(received: 1, analyzed: 0),
            .finalized(through: 1), .ended(duration: 1), .cancelled(through: 1), .error(StenoError(.internal, "x")),
            .joined(channel: "c", startedAt: UTCTime(millisecondsSince1970: 1)),
        ]
        for (index, event) in events.enumerated() {
            let encoded = event.encoded(seq: UInt64(index + 1))
            guard case .object(let object) = try JSONParser().parse(encoded.bytes) else {
                Issue.record("not an object")
                continue
            }
            #expect(object.keys.prefix(2) == ["type", "seq"])
            #expect(object["type"] == .string(event.kind.rawValue))
            #expect(object["seq"] == .number(Double(index + 1)))
            #expect(encoded.kind == event.kind)
            #expect(encoded.seq == UInt64(index + 1))
        }
    }

    @Test func replaceableKinds() {
        let replaceable = ServerEventKind.allCases.filter(\.isReplaceable)
        #expect(replaceable == [.volatile, .progress])
        #expect(ServerEvent.volatile(result(0, 0, ""), includeWords: true).encoded(seq: 1).isReplaceable)
        #expect(ServerEvent.progress(received: 1, analyzed: 1).encoded(seq: 1).isReplaceable)
        #expect(!ServerEvent.final(result(0, 0, "a"), includeWords: true).encoded(seq: 1).isReplaceable)
        #expect(!ServerEvent.error(StenoError(.badAudio, "")).encoded(seq: 1).isReplaceable)
    }
}

@Suite struct UTCTimeTests {
    @Test(arguments: [
        (Int64(0), "1970-01-01T00:00:00.000Z"),
        (Int64(1_741_356_309_042), "2025-03-07T14:05:09.042Z"),
        (Int64(951_782_400_000), "2000-02-29T00:00:00.000Z"),
        (Int64(4_107_542_399_999), "2100-02-28T23:59:59.999Z"),
        (Int64(-1), "1969-12-31T23:59:59.999Z"),
        (Int64(253_402_300_799_999), "9999-12-31T23:59:59.999Z"),
        (Int64.max, "9999-12-31T23:59:59.999Z"),
        (Int64.min, "0000-01-01T00:00:00.000Z"),
    ])
    func iso8601(_ ms: Int64, _ expected: String) {
        #expect(UTCTime(millisecondsSince1970: ms).iso8601 == expected)
        // Read back: the same instant (within the years written).
        #expect(UTCTime(iso8601: expected)?.iso8601 == expected)
    }

    @Test func readingISO8601() {
        #expect(UTCTime(iso8601: "2025-03-07T14:05:09.042Z")?.millisecondsSince1970 == 1_741_356_309_042)
        #expect(UTCTime(iso8601: "2025-03-07T14:05:09Z")?.millisecondsSince1970 == 1_741_356_309_000)
        #expect(UTCTime(iso8601: "2025-03-07T14:05:09.5Z")?.millisecondsSince1970 == 1_741_356_309_500)
        #expect(UTCTime(iso8601: "2025-03-07T14:05:09.123456Z")?.millisecondsSince1970 == 1_741_356_309_123)
        for bad in ["", "2025-03-07", "2025-03-07T14:05:09.042", "2025-13-07T14:05:09Z", "2025-03-07 14:05:09Z",
                    "2025-03-07T14:05:09.Z", "2025-03-07T24:00:00Z", "2025-03-07T14:05:09.04xZ"] {
            #expect(UTCTime(iso8601: bad) == nil, "\(bad)")
        }
    }

    @Test func fromSeconds() {
        #expect(UTCTime(secondsSince1970: 1.2345).millisecondsSince1970 == 1234)
        #expect(UTCTime(secondsSince1970: .nan).millisecondsSince1970 == 0)
        #expect(UTCTime(secondsSince1970: 1e300).iso8601 == "9999-12-31T23:59:59.999Z")
    }
}

@Suite struct ViewerWelcomeTests {
    @Test func joinedThenBackfillThenTheVolatileShowing() {
        let welcome = ViewerWelcome.events(channel: "studio-a", startedAt: UTCTime(millisecondsSince1970: 0),
                                           backfill: [result(0, 1, "one"), result(1, 2, "two")],
                                           showingVolatile: result(2, 3, "thr"), includeWords: false)
        #expect(welcome.enumerated().map { $0.element.numbered(UInt64($0.offset + 1)).text } == [
            #"{"type":"joined","seq":1,"channel":"studio-a","startedAt":"1970-01-01T00:00:00.000Z"}"#,
            #"{"type":"final","seq":2,"start":0,"end":1,"text":"one"}"#,
            #"{"type":"final","seq":3,"start":1,"end":2,"text":"two"}"#,
            #"{"type":"volatile","seq":4,"start":2,"end":3,"text":"thr"}"#,
        ])
        #expect(ViewerWelcome.events(channel: "c", startedAt: UTCTime(millisecondsSince1970: 0), backfill: [],
                                     showingVolatile: result(0, 0, ""), includeWords: true).map(\.kind) == [.joined])
    }
}
