import StenoCore
import StenoRedis
import Testing
@testable import StenoServer

/// What one instance writes into a channel's stream, the others read back as it was.
@Suite struct RelayEntryTests {
    static func fields(_ entry: RelayEntry, number: UInt64 = 7) -> [RESPValue] {
        entry.fields(instance: "inst1", session: "sess1", number: number).map { .bulk(Array($0.utf8)) }
    }

    @Test func everyKindComesBackAsItWent() throws {
        let result = RecognitionResult(
            range: TimeRange(start: 1.25, end: 2.5), text: "try again",
            words: [Word("try", range: TimeRange(start: 1.25, end: 1.7), confidence: 0.912),
                    Word("again", range: TimeRange(start: 1.7, end: 2.5), confidence: 0.5)],
            alternatives: [Alternative(text: "try again", score: 0), Alternative(text: "tri a gain", score: -3.25)])
        let final = ServerEvent.final(result, includeWords: true).encoded()
        let parsed = try #require(RelayEntry.parse(Self.fields(.event(final)), includeWords: true))
        #expect(parsed.instance == "inst1" && parsed.session == "sess1" && parsed.number == 7)
        guard case .event(let event) = parsed.entry else { Issue.record("\(parsed.entry)"); return }
        #expect(event.bytes == final.bytes)
        #expect(event.result == result)

        // Without words, as a publisher that asked for none sends its events.
        let bare = ServerEvent.volatile(result, includeWords: false).encoded()
        guard case .event(let event2)? = RelayEntry.parse(Self.fields(.event(bare)), includeWords: false)?.entry else {
            Issue.record("volatile")
            return
        }
        #expect(event2.bytes == bare.bytes)

        let speech = ServerEvent.speech(.started, at: 3.5).encoded()
        for entry: RelayEntry in [.live(broadcast: "1764443233", startedAt: UTCTime(millisecondsSince1970: 1_764_443_233_211), includeWords: false),
                                  .live(broadcast: "1", startedAt: UTCTime(millisecondsSince1970: 1), includeWords: true,
                                        renditions: Renditions(captions: "en", original: "")),
                                  .floor(12.345), .end(state: .lost, duration: 61.5, endedAt: UTCTime(millisecondsSince1970: 1_796_000_000_123)),
                                  .end(state: .ended, duration: 2, endedAt: nil), .event(speech)] {
            #expect(RelayEntry.parse(Self.fields(entry), includeWords: true)?.entry == entry, "\(entry)")
        }
    }

    @Test func somethingElseInTheStreamIsSkipped() {
        let bad: [[String]] = [
            [], ["i", "a", "s", "b"], ["i", "a", "s", "b", "k", "event", "d", "not json"],
            ["i", "a", "s", "b", "k", "event", "d", #"{"type":"ready","seq":0}"#],
            ["i", "a", "s", "b", "k", "event", "d", #"{"type":"final","seq":0,"start":1}"#],
            ["i", "a", "s", "b", "k", "floor", "d", "nan"], ["i", "a", "s", "b", "k", "live", "d", "{}"],
            ["i", "a", "s", "b", "k", "end", "d", #"{"state":"gone","duration":1}"#],
            ["i", "a", "s", "b", "k", "newer-kind", "d", "{}"],
        ]
        for fields in bad {
            #expect(RelayEntry.parse(fields.map { .bulk(Array($0.utf8)) }, includeWords: true) == nil, "\(fields)")
        }
    }
}
