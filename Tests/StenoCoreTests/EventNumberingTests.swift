import Testing
@testable import StenoCore

/// Events carry `"seq":0` until whoever delivers them numbers them.
@Suite struct EventNumberingTests {
    @Test func numberingReplacesOnlyTheNumber() throws {
        let event = ServerEvent.progress(received: 1.5, analyzed: 1.25).encoded()
        #expect(event.seq == 0)
        #expect(event.text == #"{"type":"progress","seq":0,"received":1.5,"analyzed":1.25}"#)
        #expect(event.bytes[event.seqDigits] == [UInt8(ascii: "0")][...])
        let numbered = event.numbered(1234)
        #expect(numbered.seq == 1234)
        #expect(numbered.text == #"{"type":"progress","seq":1234,"received":1.5,"analyzed":1.25}"#)
        #expect(numbered.bytes[numbered.seqDigits] == Array("1234".utf8)[...])
        #expect(numbered.numbered(7).text == #"{"type":"progress","seq":7,"received":1.5,"analyzed":1.25}"#)
        #expect(ServerEvent.progress(received: 1.5, analyzed: 1.25).encoded(seq: 7) == numbered.numbered(7))
        let largest = event.numbered(.max)
        #expect(largest.text.contains(#""seq":18446744073709551615,"#))
    }

    @Test func errorEventsCarryTheirCode() {
        let event = ServerEvent.error(StenoError(.badAudio, "x")).encoded()
        #expect(event.errorCode == .badAudio)
        #expect(event.numbered(2).errorCode == .badAudio)
        #expect(ServerEvent.ended(duration: 1).encoded().errorCode == nil)
    }
}
