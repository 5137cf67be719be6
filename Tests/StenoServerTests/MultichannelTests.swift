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

/// The OpenAI-compatible uploads take a server's tokens and origins as its sessions do, and
/// answer in OpenAI's error shape (Tests/interop posts real files through the SDK).
@Suite struct UploadAccessTests {
    @Test func tokensAndOriginsApplyToUploads() throws {
        let server = try LiveServer { $0.tokens = ["s3cret"]; $0.allowedOrigins = ["https://captions.example"] }
        let form = Array("--b\r\nContent-Disposition: form-data; name=\"model\"\r\n\r\nwhisper-1\r\n--b--\r\n".utf8)
        let type = ("Content-Type", "multipart/form-data; boundary=b")
        func post(_ headers: [(String, String)]) throws -> TestHTTPResponse {
            try HTTPTestClient.request(port: server.port, method: "POST", path: "/v1/audio/transcriptions",
                                       headers: [type] + headers, body: form)
        }
        let anonymous = try post([])
        #expect(anonymous.status == 401 && anonymous.bodyText.contains(#""code":"invalid_api_key""#))
        let foreign = try post([("Authorization", "Bearer s3cret"), ("Origin", "https://elsewhere.example")])
        #expect(foreign.status == 403 && foreign.bodyText.contains(#""error":{"#))
        let noFile = try post([("Authorization", "Bearer s3cret"), ("Origin", "https://captions.example")])
        #expect(noFile.status == 400 && noFile.bodyText.contains(#""param":"file""#), "\(noFile.bodyText)")
        let elsewhere = try HTTPTestClient.request(port: server.port, method: "POST", path: "/healthz", body: [1])
        #expect(elsewhere.status == 405)
        let metrics = try server.metrics()
        #expect(metrics[#"steno_uploads_total{status="401"}"#] == 1 && metrics[#"steno_uploads_total{status="403"}"#] == 1)
        #expect(metrics[#"steno_uploads_total{status="400"}"#] == 1)
    }
}
