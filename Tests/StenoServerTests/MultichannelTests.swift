import Foundation
import StenoCore
import StenoTestSupport
import Testing
@testable import StenoServer

/// `start`'s `multichannel`: each channel of an interleaved PCM stream is a session of its own on
/// the connection, every event carrying its `channel`; the connection closes once every
/// channel's session has ended.
@Suite struct MultichannelTests {
    @Test func eachChannelIsHeardOnItsOwnAndEveryEventSaysWhichOne() throws {
        let server = try LiveServer()
        let client = try server.connect()
        // Beckett on the left, silence on the right.
        let left = Speech.s16le(Speech.beckett16k)
        var interleaved = [UInt8]()
        interleaved.reserveCapacity(left.count * 2)
        for i in stride(from: 0, to: left.count, by: 2) { interleaved += [left[i], left[i + 1], 0, 0] }
        try client.send(#"{"type":"start","audio":{"encoding":"pcm_s16le","sampleRate":16000,"channels":2},"multichannel":true}"#)
        // Pieces that are not whole frames: the split keeps each sample whole.
        for piece in stride(from: 0, to: interleaved.count, by: 6402) {
            try client.sendBinary(Array(interleaved[piece..<min(piece + 6402, interleaved.count)]))
        }
        try client.end()
        #expect(client.closeCode == 1000)
        let events = client.events
        let readies = events.filter { $0.type == "ready" }
        #expect(readies.count == 2 && Set(readies.compactMap { $0.string("session") }).count == 2)
        #expect(Set(readies.compactMap { $0.number("channel") }) == [0, 1])
        #expect(readies.allSatisfy { $0.string("resumeToken") == nil }, "a multichannel connection is not resumed")
        // Every event says its channel; seq counts the connection's events without a gap.
        #expect(events.allSatisfy { $0.number("channel") != nil }, "\(events.types)")
        #expect(events.map(\.seq) == Array(1...events.count))
        let finals = events.filter { $0.type == "final" }
        #expect(!finals.isEmpty && finals.allSatisfy { $0.number("channel") == 0 }, "speech only on the left")
        let ended = events.filter { $0.type == "ended" }
        #expect(ended.count == 2 && ended.allSatisfy { abs(($0.number("duration") ?? 0) - Double(left.count / 2) / 16000) < 0.01 })
    }

    @Test func aMultichannelStartThatCannotBeServedIsABadMessage() throws {
        let server = try LiveServer()
        let client = try server.connect()
        for start in [#"{"type":"start","audio":{"encoding":"opus","sampleRate":48000,"channels":2},"multichannel":true}"#,
                      #"{"type":"start","audio":{"encoding":"pcm_s16le","sampleRate":16000,"channels":9},"multichannel":true}"#,
                      #"{"type":"start","audio":{"encoding":"pcm_s16le","sampleRate":16000,"channels":2},"multichannel":true,"channel":"x"}"#] {
            try client.send(start)
            let error = try client.waitFor("error")
            #expect(error.string("code") == "bad_message" && error.bool("fatal") == false, "\(start)")
        }
        // One channel: nothing to split, an ordinary session.
        try client.send(#"{"type":"start","audio":{"encoding":"pcm_s16le","sampleRate":16000,"channels":1},"multichannel":true}"#)
        #expect(try client.waitFor("ready").number("channel") == nil)
        try client.end()
        #expect(client.closeCode == 1000)
    }
}
