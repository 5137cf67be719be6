import Testing
@testable import StenoCore

@Suite struct SeqRewritingTests {
    @Test func replacingSeqKeepsEverythingElse() throws {
        let event = ServerEvent.progress(received: 1.5, analyzed: 1.25).encoded(seq: 7)
        let rewritten = try #require(EncodedEvent.replacingSeq(in: event.bytes, with: 1234))
        #expect(String(decoding: rewritten, as: UTF8.self) == event.resequenced(1234).text)
        #expect(EncodedEvent.replacingSeq(in: Array("not json".utf8), with: 1) == nil)
        #expect(EncodedEvent.replacingSeq(in: Array(#"{"type":"x","seq":}"#.utf8), with: 1) == nil)
    }

    @Test func errorEventsCarryTheirCode() {
        let event = ServerEvent.error(StenoError(.badAudio, "x")).encoded(seq: 1)
        #expect(event.errorCode == .badAudio)
        #expect(event.resequenced(2).errorCode == .badAudio)
        #expect(ServerEvent.ended(duration: 1).encoded(seq: 1).errorCode == nil)
    }
}
