import Foundation
import StenoCore
import StenoTransport
import StenoSystem
import Testing
@testable import StenoServer

/// Channels in memory: the publisher's lifecycle as viewers see it, the channel list, past
/// broadcasts' files, wall-clock times, the live HLS track, and bounded per-channel metrics.
@Suite struct ChannelLifecycleTests {
    static func start(channel: String, format: String = "raw") -> String {
        #"{"type":"start","audio":{"encoding":"pcm_s16le","sampleRate":16000,"channels":1},"channel":"\#(channel)","format":"\#(format)"}"#
    }

    /// `seconds` of speech then `pause` of silence, in blocks, settling as it goes.
    static func talk(_ server: MemoryServer, _ id: ConnectionID, seconds: Double, pause: Double) {
        let block = 0.128
        for _ in 0..<Int(seconds / block) {
            server.send(id, audio: MemoryServer.pcm(seconds: block, speech: true))
            server.settle()
        }
        for _ in 0..<Int(pause / block) {
            server.send(id, audio: MemoryServer.pcm(seconds: block, speech: false))
            server.settle()
        }
    }

    static func get(_ server: MemoryServer, _ path: String, headers: [(String, String)] = []) -> HTTPResponse {
        let (path, query) = MemoryServer.split(path)
        return server.router.http(HTTPRequest(path: path, query: query, headers: HTTPHeaders(headers)))
            ?? .plain(status: 599)
    }

    static func json(_ response: HTTPResponse) -> JSONObject? {
        if case .object(let o)? = try? JSONParser().parse(response.body) { return o }
        return nil
    }

    static func publisherStates(_ events: [JSONObject]) -> [String] {
        events.filter { $0.type == "publisher" }.compactMap { if case .string(let s)? = $0["state"] { s } else { nil } }
    }

    @Test func viewersAreToldWhenTheBroadcastStartsEndsOrIsLost() throws {
        let server = MemoryServer()
        let viewer = try #require(server.connect("/v1/listen?channel=hall").1)
        #expect(server.events(viewer).map(\.type) == ["joined"], "no broadcast yet: no publisher state")

        let first = try #require(server.connect().1)
        server.send(first, Self.start(channel: "hall"))
        Self.talk(server, first, seconds: 1, pause: 0.5)
        #expect(Self.publisherStates(server.events(viewer)) == ["live"])
        server.send(first, #"{"type":"end"}"#)
        server.settle()
        let events = server.events(viewer)
        #expect(Self.publisherStates(events) == ["live", "ended"])
        // Ended after its last final.
        #expect(events.last?.type == "publisher")
        #expect(events.contains { $0.type == "final" })

        // A late viewer learns at once that the broadcast is over.
        let late = try #require(server.connect("/v1/listen?channel=hall").1)
        #expect(server.events(late).map(\.type).prefix(2) == ["joined", "publisher"])
        #expect(Self.publisherStates(server.events(late)) == ["ended"])

        // The next publisher drops its connection without ending: lost (no resume here).
        let second = try #require(server.connect().1)
        server.send(second, Self.start(channel: "hall"))
        Self.talk(server, second, seconds: 0.6, pause: 0.3)
        server.disconnect(second)
        server.settle()
        let all = server.events(viewer)
        #expect(Self.publisherStates(all) == ["live", "ended", "live", "lost"])
        #expect(all.filter { $0.type == "joined" }.count == 3)
        // One broadcast id per publisher, the same in every event about it.
        let ids = all.filter { $0.type == "publisher" }.compactMap { if case .string(let s)? = $0["broadcast"] { s } else { nil } }
        #expect(ids.count == 4 && ids[0] == ids[1] && ids[2] == ids[3] && ids[1] != ids[2])
    }

    @Test func theChannelAndTheSessionsPlaceAreFreeBeforeThePublisherCanReadThatItEnded() throws {
        // A client that starts the next publisher as soon as it reads `ended` must find the
        // channel free and the server not full: both go before `ended` is handed over.
        let server = MemoryServer()
        let first = try #require(server.connect().1)
        let stateAtEnded = Locked<(channel: String?, live: Int)?>(nil)
        let channels = server.channels
        let sessions = server.sessions
        server.connections.onSend.withLock {
            $0 = { id, message in
                guard id == first, String(decoding: message.bytes, as: UTF8.self).contains(#""type":"ended""#) else { return }
                stateAtEnded.withLock { $0 = (channels.summaries.first { $0.name == "relay" }?.state, sessions.liveCount) }
            }
        }
        server.send(first, Self.start(channel: "relay"))
        Self.talk(server, first, seconds: 1, pause: 0.5)
        server.send(first, #"{"type":"end"}"#)
        server.settle()
        #expect(server.events(first).last?.type == "ended")
        let atEnded = try #require(stateAtEnded.withLock { $0 })
        #expect(atEnded.channel == "ended", "the channel was still held when ended was sent")
        #expect(atEnded.live == 0, "the session still counted against capacity when ended was sent")
        let second = try #require(server.connect().1)
        server.send(second, Self.start(channel: "relay"))
        server.settle()
        #expect(!server.events(second).contains { $0.type == "error" })
    }

    @Test func finalsThatComeTogetherAreKeptForTheChannelAsTheyWereSent() throws {
        // One batch of audio holding two utterances: the recognizer reports both finals at
        // once, and the channel keeps each final its event carried (not the session's last).
        let server = MemoryServer()
        let publisher = try #require(server.connect().1)
        server.send(publisher, Self.start(channel: "batch"))
        server.settle()
        let speech = { (blocks: Int) in MemoryServer.pcm(samples: blocks * 2048, speech: true) }
        let silence = { (blocks: Int) in MemoryServer.pcm(samples: blocks * 2048, speech: false) }
        server.send(publisher, audio: speech(3) + silence(1) + speech(2) + silence(1))
        server.settle()
        let sent = server.events(publisher).filter { $0.type == "final" }.compactMap { if case .string(let s)? = $0["text"] { s } else { nil } }
        #expect(sent == ["w1 w2 w3", "w1 w2"])
        #expect(server.channels.broadcast("batch")?.finals.map(\.text) == sent)
        let text = String(decoding: Self.get(server, "/v1/channels/batch/captions.txt").body, as: UTF8.self)
        #expect(text.contains("w1 w2 w3"), "\(text)")
    }

    @Test func theChannelListAndPastBroadcasts() throws {
        let server = MemoryServer { $0.pastBroadcasts = 1 }
        var readies: [String] = []
        for round in 0..<3 {
            let id = try #require(server.connect().1)
            server.send(id, Self.start(channel: "studio"))
            Self.talk(server, id, seconds: Double(round + 1) * 0.5, pause: 0.4)
            if round < 2 {
                server.send(id, #"{"type":"end"}"#)
                server.settle()
            }
            readies.append(server.events(id).first { $0.type == "ready" }.flatMap { if case .string(let s)? = $0["startedAt"] { s } else { nil } } ?? "")
        }
        _ = server.connect("/v1/listen?channel=waiting-room")
        let list = try #require(Self.json(Self.get(server, "/v1/channels")))
        guard case .array(let channels)? = list["channels"] else { Issue.record("no channels: \(list)"); return }
        #expect(channels.count == 2)
        guard case .object(let studio) = channels[0], case .object(let waiting) = channels[1] else { return }
        #expect(studio["name"] == .string("studio") && studio["state"] == .string("live"))
        #expect(studio["startedAt"] == .string(readies[2]))
        #expect(studio["viewers"] == .number(0) && studio["finals"] == .number(1))
        #expect(waiting["state"] == .string("idle") && waiting["startedAt"] == .null && waiting["viewers"] == .number(1))

        // Two broadcasts kept: the latest (live) and one before it.
        let kept = try #require(Self.json(Self.get(server, "/v1/channels/studio/broadcasts")))
        guard case .array(let broadcasts)? = kept["broadcasts"], broadcasts.count == 2,
              case .object(let past) = broadcasts[0], case .string(let pastID)? = past["id"] else {
            Issue.record("\(kept)")
            return
        }
        #expect(past["state"] == .string("ended"))
        let pastVTT = Self.get(server, "/v1/channels/studio/broadcasts/\(pastID)/captions.vtt")
        #expect(pastVTT.status == 200)
        let currentVTT = Self.get(server, "/v1/channels/studio/captions.vtt")
        #expect(String(decoding: pastVTT.body, as: UTF8.self) != String(decoding: currentVTT.body, as: UTF8.self))
        #expect(Self.get(server, "/v1/channels/studio/broadcasts/1/captions.vtt").status == 404)
        #expect(Self.get(server, "/v1/channels/nowhere/captions.vtt").status == 404)

        // Times of day: the audio timeline moved by the broadcast's start (UTC).
        let audio = String(decoding: Self.get(server, "/v1/channels/studio/captions.txt").body, as: UTF8.self)
        let wall = String(decoding: Self.get(server, "/v1/channels/studio/captions.txt?clock=wall").body, as: UTF8.self)
        let startedAt = readies[2]
        func seconds(_ hms: Substring) -> Double {
            let parts = hms.split(separator: ":").map { Double($0)! }
            return parts[0] * 3600 + parts[1] * 60 + parts[2]
        }
        let timeOfDay = Double(Int((seconds(startedAt.dropFirst(11).prefix(12)) * 1000).rounded())) / 1000
        let firstAudio = seconds(audio.dropFirst(1).prefix(12))
        #expect(wall.hasPrefix("[" + Captions.timestamp(firstAudio + timeOfDay, separator: ".") + " → "),
                "\(wall) for a start at \(startedAt)")
        #expect(wall.split(separator: "\n").count == audio.split(separator: "\n").count)
    }

    @Test func theLiveHLSTrackFollowsTheBroadcastAndEnds() throws {
        let server = MemoryServer { $0.hls = HLSConfiguration(segmentSeconds: 2, windowSegments: 3) }
        let publisher = try #require(server.connect().1)
        server.send(publisher, Self.start(channel: "tv", format: "readable"))
        var segmentsSeen: [Int: String] = [:]
        for round in 0..<8 {
            Self.talk(server, publisher, seconds: 1.0, pause: 0.6 + Double(round % 3) * 0.4)
            let playlist = String(decoding: Self.get(server, "/v1/channels/tv/captions.m3u8").body, as: UTF8.self)
            #expect(playlist.hasPrefix("#EXTM3U\n#EXT-X-VERSION:3\n#EXT-X-TARGETDURATION:2\n#EXT-X-MEDIA-SEQUENCE:"))
            #expect(!playlist.contains("#EXT-X-ENDLIST"))
            for line in playlist.split(separator: "\n") where line.hasPrefix("captions/") {
                let sequence = Int(line.dropFirst(9).dropLast(4))!
                let response = Self.get(server, "/v1/channels/tv/" + line)
                #expect(response.status == 200)
                #expect(response.headers.contains { $0.name == "Cache-Control" && $0.value.contains("immutable") })
                let body = String(decoding: response.body, as: UTF8.self)
                if let before = segmentsSeen[sequence] { #expect(before == body, "segment \(sequence) changed") }
                segmentsSeen[sequence] = body
            }
        }
        #expect(segmentsSeen.count >= 4, "segments are published while the publisher speaks")
        server.send(publisher, #"{"type":"end"}"#)
        server.settle()
        let response = Self.get(server, "/v1/channels/tv/captions.m3u8")
        #expect(response.headers.contains { $0.name == "Cache-Control" && $0.value == "public, max-age=1" })
        let playlist = String(decoding: response.body, as: UTF8.self)
        #expect(playlist.hasSuffix("#EXT-X-ENDLIST\n"))
        for line in playlist.split(separator: "\n") where line.hasPrefix("captions/") {
            segmentsSeen[Int(line.dropFirst(9).dropLast(4))!] = String(decoding: Self.get(server, "/v1/channels/tv/" + line).body, as: UTF8.self)
        }
        // Every cue of the caption file is in the segments, in order, and nothing else is
        // (a segment ends with a blank line, and one without cues is its header alone).
        let file = String(decoding: Self.get(server, "/v1/channels/tv/captions.vtt").body, as: UTF8.self)
        let fileCues = file.components(separatedBy: "\n\n").dropFirst().map { $0.trimmingCharacters(in: .newlines) }
        var segmentCues: [String] = []
        for sequence in segmentsSeen.keys.sorted() {
            for cue in segmentsSeen[sequence]!.components(separatedBy: "\n\n").dropFirst()
                .map({ $0.trimmingCharacters(in: .newlines) }) where !cue.isEmpty && !segmentCues.contains(cue) {
                segmentCues.append(cue)
            }
        }
        #expect(fileCues.count >= 8)
        #expect(segmentCues == fileCues)
        #expect(file.contains("W1"), "readable: capitals")
    }

    @Test func perChannelMetricsStayBounded() throws {
        let server = MemoryServer()
        for index in 0..<40 { _ = server.connect("/v1/listen?channel=room\(index)") }
        let metrics = server.metrics.registry.exposition()
        let series = metrics.split(separator: "\n").filter { $0.hasPrefix("steno_channel_viewers{") }
        #expect(series.count == 33, "32 channels by name and the others together")
        #expect(metrics.contains(#"steno_channel_viewers{channel="room0"} 1"#))
        #expect(metrics.contains(#"steno_channel_viewers{channel="(other)"} 8"#))
    }

    @Test func tokensGuardTheChannelRoutes() throws {
        let server = MemoryServer { $0.tokens = ["secret"] }
        #expect(Self.get(server, "/v1/channels").status == 401)
        #expect(Self.get(server, "/v1/channels?token=secret").status == 200)
        _ = server.connect("/v1/listen?channel=x&token=secret")
        #expect(Self.get(server, "/v1/channels/x/captions.m3u8?token=wrong").status == 401)
        let playlist = String(decoding: Self.get(server, "/v1/channels/x/captions.m3u8?token=secret").body, as: UTF8.self)
        #expect(playlist.hasPrefix("#EXTM3U\n"), "a channel without a broadcast yet: an open, empty playlist")
        let authorized = Self.get(server, "/v1/channels/x/captions.m3u8", headers: [("Authorization", "Bearer secret")])
        #expect(authorized.status == 200)
        #expect(authorized.headers.contains { $0.name == "Cache-Control" && $0.value == "private, max-age=1" })
    }
}
