import Foundation
import StenoCore
import StenoRedis
import StenoTransport
import Testing
@testable import StenoServer

/// A translated broadcast in memory: viewers follow its English or its original
/// (`/v1/listen?…&language=`), and so do caption files, the live HLS playlists and their
/// segments; the multivariant playlist lists both renditions by language. (The real worker
/// making such finals: MultilingualServeTests.)
@Suite struct ChannelLanguageTests {
    /// A translated final over `[start, start + 2)`: its English, and the Italian it translates.
    static func final(_ start: Double, _ english: String, _ italian: String) -> EncodedEvent {
        func words(_ text: String) -> [Word] {
            let parts = text.split(separator: " ")
            let each = 1.8 / Double(parts.count)
            return parts.enumerated().map { i, w in
                Word(String(w), range: TimeRange(start: start + Double(i) * each, end: start + Double(i + 1) * each), confidence: 0.9)
            }
        }
        let result = RecognitionResult(range: TimeRange(start: start, end: start + 1.8), text: english, words: words(english),
                                       written: true, language: "it",
                                       original: Original(text: italian, words: words(italian), language: "it"))
        return ServerEvent.final(result, includeWords: true).encoded()
    }

    static func texts(_ events: [JSONObject], _ type: String = "final") -> [String] {
        events.filter { $0.type == type }.compactMap { if case .string(let s)? = $0["text"] { s } else { nil } }
    }

    static func body(_ server: MemoryServer, _ path: String) -> (status: Int, text: String) {
        let response = ChannelLifecycleTests.get(server, path)
        return (response.status, String(decoding: response.body, as: UTF8.self))
    }

    @Test func viewersFilesAndPlaylistsFollowTheLanguageAsked() throws {
        let server = MemoryServer { $0.hls = HLSConfiguration(segmentSeconds: 2, windowSegments: 3) }
        let hub = server.channels
        let english = try #require(server.connect("/v1/listen?channel=tr").1)
        let asEnglish = try #require(server.connect("/v1/listen?channel=tr&language=en-GB").1)
        let italian = try #require(server.connect("/v1/listen?channel=tr&language=it").1)
        let original = try #require(server.connect("/v1/listen?channel=tr&language=original").1)
        let french = try #require(server.connect("/v1/listen?channel=tr&language=fr").1)
        if case .reject(let response) = server.connect("/v1/listen?channel=tr&language=not%20a%20tag").0 {
            #expect(response.status == 400)
        } else {
            Issue.record("a language that is no tag is refused")
        }

        #expect(hub.claim("tr", session: "s1", startedAt: UTCTime(millisecondsSince1970: 1_764_443_233_000), includeWords: true,
                          renditions: Renditions(captions: "en", original: "it")))
        let volatile = RecognitionResult(range: TimeRange(start: 0, end: 1), text: "Good morning", written: true)
        hub.publish(ServerEvent.volatile(volatile, includeWords: true).encoded(), on: "tr", from: "s1")
        hub.publish(Self.final(0, "Good morning everyone.", "Buongiorno a tutti."), on: "tr", from: "s1")
        hub.publish(ServerEvent.speech(.started, at: 2.1).encoded(), on: "tr", from: "s1")
        hub.publish(Self.final(2.2, "Today we talk about Rome.", "Oggi parliamo di Roma."), on: "tr", from: "s1")

        let englishFinals = ["Good morning everyone.", "Today we talk about Rome."]
        let italianFinals = ["Buongiorno a tutti.", "Oggi parliamo di Roma."]
        for viewer in [english, asEnglish] {
            let events = server.events(viewer)
            #expect(Self.texts(events) == englishFinals)
            #expect(Self.texts(events, "volatile") == ["Good morning"])
        }
        for viewer in [italian, original] {
            let events = server.events(viewer)
            #expect(Self.texts(events) == italianFinals)
            #expect(events.filter { $0.type == "final" }.allSatisfy { $0["language"] == .string("it") && $0["original"] == nil })
            #expect(Self.texts(events, "volatile").isEmpty, "the original has no volatiles")
            #expect(events.contains { $0.type == "speech" })
            #expect(events.map(\.type).prefix(3) == ["joined", "joined", "publisher"], "joined, then the broadcast began")
        }
        // A language the broadcast does not carry: told so, and given the publisher's own.
        let frenchEvents = server.events(french)
        let error = try #require(frenchEvents.first { $0.type == "error" })
        #expect(error["code"] == .string("bad_message") && error["fatal"] == .bool(false))
        if case .string(let message)? = error["message"] {
            #expect(message.contains("\"fr\"; it has en, it"), "\(message)")
        }
        #expect(Self.texts(frenchEvents) == englishFinals)

        // A viewer joining later gets the backfill in its language.
        let late = try #require(server.connect("/v1/listen?channel=tr&language=it").1)
        #expect(Self.texts(server.events(late)) == italianFinals)

        // Caption files, one per language; none for a language it does not carry.
        let vtt = Self.body(server, "/v1/channels/tr/captions.txt?language=it")
        #expect(vtt.status == 200 && vtt.text.contains("Buongiorno") && !vtt.text.contains("morning"), "\(vtt.text)")
        #expect(Self.body(server, "/v1/channels/tr/captions.txt").text.contains("Good morning"))
        #expect(Self.body(server, "/v1/channels/tr/captions.srt?language=en").text.contains("Rome"))
        #expect(Self.body(server, "/v1/channels/tr/captions.vtt?language=fr").status == 404)
        let listed = Self.body(server, "/v1/channels").text
        #expect(listed.contains(#""languages":["en","it"]"#), "\(listed)")

        // Live HLS, one track per language: the broadcast ends and every segment is published.
        hub.advance("tr", session: "s1", floor: 6)
        hub.release("tr", session: "s1", state: .ended, duration: 5, now: UTCTime(millisecondsSince1970: 1_764_443_238_000))
        let playlist = Self.body(server, "/v1/channels/tr/captions.m3u8?language=it&token=t")
        #expect(playlist.text.contains("captions/1764443233.vtt?language=it&token=t"), "\(playlist.text)")
        #expect(playlist.text.contains("#EXT-X-ENDLIST"))
        let segment = Self.body(server, "/v1/channels/tr/captions/1764443234.vtt?language=it")
        #expect(segment.status == 200 && segment.text.contains("Oggi parliamo di Roma.") && !segment.text.contains("Rome"),
                "\(segment.text)")
        #expect(Self.body(server, "/v1/channels/tr/captions/1764443234.vtt").text.contains("Rome"))
        #expect(Self.body(server, "/v1/channels/tr/captions.m3u8?language=fr").status == 404)

        // The multivariant playlist: both renditions, by language, with the video.
        let master = Self.body(server, "/v1/channels/tr/master.m3u8?video=video/index.m3u8&token=t")
        #expect(master.text == """
            #EXTM3U
            #EXT-X-VERSION:3
            #EXT-X-MEDIA:TYPE=SUBTITLES,GROUP-ID="subs",NAME="en",LANGUAGE="en",DEFAULT=YES,AUTOSELECT=YES,URI="captions.m3u8?language=en&token=t"
            #EXT-X-MEDIA:TYPE=SUBTITLES,GROUP-ID="subs",NAME="it (original)",LANGUAGE="it",DEFAULT=NO,AUTOSELECT=YES,URI="captions.m3u8?language=it&token=t"
            #EXT-X-STREAM-INF:BANDWIDTH=2500000,SUBTITLES="subs"
            video/index.m3u8

            """, "\(master.text)")
        #expect(Self.body(server, "/v1/channels/tr/master.m3u8").status == 400, "a video is needed")
    }

    /// Another instance's translated broadcast, as its relay writes it into Redis and this one
    /// reads it back: the renditions come with `live`, each original inside its final.
    @Test func anotherInstancesTranslationReachesViewersHereInEitherLanguage() throws {
        let server = MemoryServer()
        let italian = try #require(server.connect("/v1/listen?channel=far&language=it").1)
        let english = try #require(server.connect("/v1/listen?channel=far").1)
        let written: [RelayEntry] = [
            .live(broadcast: "1764443233", startedAt: UTCTime(millisecondsSince1970: 1_764_443_233_000), includeWords: true,
                  renditions: Renditions(captions: "en", original: "it")),
            .event(Self.final(0, "Good morning everyone.", "Buongiorno a tutti.")),
        ]
        for entry in written {
            let fields = entry.fields(instance: "other", session: "s9", number: 1).map { RESPValue.bulk(Array($0.utf8)) }
            let read = try #require(RelayEntry.parse(fields, includeWords: server.channels.remoteIncludesWords("far")))
            server.channels.applyRemote(read.entry, channel: "far", session: read.session, instance: read.instance)
        }
        #expect(Self.texts(server.events(italian)) == ["Buongiorno a tutti."])
        #expect(Self.texts(server.events(english)) == ["Good morning everyone."])
        #expect(Self.body(server, "/v1/channels/far/captions.txt?language=it").text.contains("Buongiorno"))
    }

    @Test func whatABroadcastCarriesFollowsItsStart() throws {
        func renditions(_ start: String, model: String? = "mul") throws -> Renditions {
            guard case .start(let request) = try ClientMessage.parse(start) else { throw StenoError(.badMessage, "not a start") }
            return Renditions(request: request, modelLanguage: model)
        }
        let audio = #""audio":{"encoding":"pcm_s16le","sampleRate":16000,"channels":1}"#
        #expect(try renditions(#"{"type":"start",\#(audio),"language":"it-IT","translate":"en"}"#) == Renditions(captions: "en", original: "it"))
        #expect(try renditions(#"{"type":"start",\#(audio),"language":"auto","translate":"en"}"#) == Renditions(captions: "en", original: ""))
        #expect(try renditions(#"{"type":"start",\#(audio),"translate":"en"}"#) == Renditions(captions: "en", original: ""))
        #expect(try renditions(#"{"type":"start",\#(audio),"language":"it"}"#) == Renditions(captions: "it"))
        #expect(try renditions(#"{"type":"start",\#(audio)}"#, model: "en-US") == Renditions(captions: "en"))
        #expect(try renditions(#"{"type":"start",\#(audio),"languages":["ru","en"]}"#) == Renditions())

        let found = Renditions(captions: "en", original: "")
        #expect(found.names == ["en", "original"])
        #expect(found.choose("original") == .original && found.choose("it") == nil && found.choose(nil) == .captions)
        #expect(Renditions().choose("en") == nil && Renditions().choose(nil) == .captions && Renditions().names.isEmpty)
        #expect(Renditions(captions: "en", original: "en").names == ["en", "original"])
        #expect(Renditions(captions: "en").choose("original") == nil)
    }
}
