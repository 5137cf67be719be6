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

    @Test func aSlotWritesTheNumberWhereverTheBytesGo() {
        let bytes = Array(#"{"n":0,"t":"x"}"#.utf8)
        let slot = SeqSlot(5..<6)
        #expect(slot.count(numbering: bytes.count, seq: 42) == bytes.count + 1)
        let (numbered, moved) = slot.numbered(bytes, seq: 42)
        #expect(String(decoding: numbered, as: UTF8.self) == #"{"n":42,"t":"x"}"#)
        #expect(moved == SeqSlot(5..<7))
        // Into memory of the caller's, behind headroom of its own (as a connection's frame is).
        let headroom = 16
        let total = headroom + slot.count(numbering: bytes.count, seq: 7)
        let out = UnsafeMutableRawPointer.allocate(byteCount: total, alignment: 16)
        defer { out.deallocate() }
        #expect(slot.write(bytes, seq: 7, to: out + headroom) == SeqSlot(5..<6))
        #expect(Array(UnsafeRawBufferPointer(start: out + headroom, count: total - headroom)) == Array(#"{"n":7,"t":"x"}"#.utf8))
        // An empty slot is an insertion; an empty message is the number alone.
        #expect(SeqSlot(0..<0).numbered([], seq: 1000).bytes == Array("1000".utf8))
        #expect(SeqSlot(1..<1).numbered(Array("ab".utf8), seq: 0).bytes == Array("a0b".utf8))
    }

    @Test func errorEventsCarryTheirCode() {
        let event = ServerEvent.error(StenoError(.badAudio, "x")).encoded()
        #expect(event.errorCode == .badAudio)
        #expect(event.numbered(2).errorCode == .badAudio)
        #expect(ServerEvent.ended(duration: 1).encoded().errorCode == nil)
    }
}
