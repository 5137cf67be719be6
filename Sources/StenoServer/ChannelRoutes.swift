import StenoCore
import StenoTransport

/// The HTTP routes of channels, for players, CDNs and broadcasters (the caller checked tokens):
///
/// - `/v1/channels`: every channel, as JSON.
/// - `/v1/channels/NAME/captions.vtt|.srt|.txt|.scc|.ttml`: the latest broadcast's captions so far.
/// - `/v1/channels/NAME/broadcasts`: the broadcasts the server keeps, as JSON;
///   `/v1/channels/NAME/broadcasts/ID/captions.vtt|…`: one of them.
/// - `?clock=wall` on caption files: times of day (UTC) instead of the audio timeline;
///   `?mode=rollup` on SCC files: roll-up captions instead of pop-on.
/// - `/v1/channels/NAME/captions.m3u8`: the live HLS subtitle playlist;
///   `/v1/channels/NAME/captions/SEQ.vtt`: its segments.
/// - `?language=` on caption files, playlists and segments: the broadcast's captions in that
///   language (`Renditions`: a translated session's original beside its English); 404 for one
///   it does not carry. `/v1/channels/NAME/master.m3u8?video=URI`: a multivariant playlist
///   with one subtitle rendition per language, for the video at `URI`.
///
/// Segments never change once published, so they may be cached for good; playlists change
/// with every segment and are cached for a second. A token given in the query string is
/// passed on in the playlist's segment URIs (players do not carry it over by themselves), and
/// responses to requests with an `Authorization` header are private (a shared cache would
/// otherwise hand them to anyone). Any origin may read them (`Access-Control-Allow-Origin`),
/// unless the server restricts origins.
struct ChannelRoutes {
    let channels: ChannelHub
    let allowedOrigins: Set<String>?

    static let prefix = "/v1/channels"

    func response(to request: HTTPRequest) -> HTTPResponse {
        var response = route(request)
        let shared = request.headers["authorization"] == nil
        let cache: String = switch response.status {
        case 200 where response.contentType.hasPrefix("text/vtt") && request.path.contains("/captions/"):
            "\(shared ? "public" : "private"), max-age=31536000, immutable"
        case 200 where response.contentType.hasPrefix(Self.playlistType):
            "\(shared ? "public" : "private"), max-age=1"
        default:
            "no-store"
        }
        response.headers.append((name: "Cache-Control", value: cache))
        if let origin = request.headers["origin"] {
            if let allowedOrigins {
                if allowedOrigins.contains(origin) {
                    response.headers.append((name: "Access-Control-Allow-Origin", value: origin))
                }
                response.headers.append((name: "Vary", value: "Origin"))
            } else {
                response.headers.append((name: "Access-Control-Allow-Origin", value: "*"))
            }
        } else if allowedOrigins == nil {
            response.headers.append((name: "Access-Control-Allow-Origin", value: "*"))
        }
        return response
    }

    static let playlistType = "application/vnd.apple.mpegurl"

    private func route(_ request: HTTPRequest) -> HTTPResponse {
        if request.path == Self.prefix || request.path == Self.prefix + "/" { return list() }
        let parts = request.path.dropFirst(Self.prefix.count + 1).split(separator: "/", omittingEmptySubsequences: false)
            .map(String.init)
        guard let name = parts.first, ChannelName.isValid(name) else { return .plain(status: 404) }
        let wall = request.queryValue("clock") == "wall"
        let language = request.queryValue("language")
        switch parts.count {
        case 2 where parts[1] == "captions.m3u8":
            var query: [String] = []
            if let language { query.append("language=" + Self.percentEncoded(language)) }
            if let token = request.queryValue("token") { query.append("token=" + Self.percentEncoded(token)) }
            guard let playlist = channels.playlist(name, language: language, query: query.isEmpty ? "" : "?" + query.joined(separator: "&"))
            else { return .plain(status: 404) }
            return HTTPResponse(status: 200, contentType: Self.playlistType, text: playlist)
        case 2 where parts[1] == "master.m3u8":
            return master(name, request: request)
        case 2 where parts[1] == "broadcasts":
            return broadcasts(name)
        case 2:
            guard let format = Self.captionFormat(parts[1]), let broadcast = channels.broadcast(name) else {
                return .plain(status: 404)
            }
            return captions(broadcast, language: language, format: format, wall: wall, request: request)
        case 3 where parts[1] == "captions":
            guard parts[2].hasSuffix(".vtt"), let sequence = Int(parts[2].dropLast(4)), sequence >= 0,
                  let body = channels.segment(name, sequence: sequence, language: language) else { return .plain(status: 404) }
            return HTTPResponse(status: 200, contentType: CaptionFormat.webVTT.contentType, text: body)
        case 4 where parts[1] == "broadcasts":
            guard let format = Self.captionFormat(parts[3]), let broadcast = channels.broadcast(name, id: parts[2]) else {
                return .plain(status: 404)
            }
            return captions(broadcast, language: language, format: format, wall: wall, request: request)
        default:
            return .plain(status: 404)
        }
    }

    private static func captionFormat(_ file: String) -> CaptionFormat? {
        switch file {
        case "captions.vtt": .webVTT
        case "captions.srt": .srt
        case "captions.txt": .plainText
        case "captions.scc": .scc
        case "captions.ttml": .ttml
        default: nil
        }
    }

    private func captions(_ broadcast: (finals: [RecognitionResult], startedAt: UTCTime?, renditions: Renditions),
                          language: String?, format: CaptionFormat, wall: Bool, request: HTTPRequest) -> HTTPResponse {
        let finals: [RecognitionResult]
        switch broadcast.renditions.choose(language) {
        case .captions?: finals = broadcast.finals
        case .original?: finals = broadcast.finals.compactMap(\.originalResult)
        case nil: return .plain(status: 404)
        }
        let offset = wall ? broadcast.startedAt.map(Captions.timeOfDay) ?? 0 : 0
        var mode = SCCWriter.Mode.popOn
        if let asked = request.queryValue("mode") {
            guard format == .scc, let known = SCCWriter.Mode(rawValue: asked) else {
                return HTTPResponse(status: 400, contentType: "text/plain; charset=utf-8",
                                    text: "mode must be popon or rollup, on an SCC file\n")
            }
            mode = known
        }
        return HTTPResponse(status: 200, contentType: format.contentType,
                            text: Captions.render(finals, as: format, layout: channels.layout, offset: offset, sccMode: mode))
    }

    /// The latest broadcast's languages as subtitle renditions of the video at `?video=URI`
    /// (`?bandwidth=` its bits per second, 2,500,000 by default); a token is passed on.
    private func master(_ name: String, request: HTTPRequest) -> HTTPResponse {
        guard let broadcast = channels.broadcast(name) else { return .plain(status: 404) }
        guard let video = request.queryValue("video"), HLSMultivariantPlaylist.isUsable(video) else {
            return HTTPResponse(status: 400, contentType: "text/plain; charset=utf-8",
                                text: "master.m3u8 needs ?video=URI, the video's playlist (players show subtitles with a video)\n")
        }
        let bandwidth = request.queryValue("bandwidth").flatMap { Int($0) }.flatMap { $0 > 0 ? $0 : nil } ?? 2_500_000
        let query = request.queryValue("token").map { "&token=" + Self.percentEncoded($0) } ?? ""
        return HTTPResponse(status: 200, contentType: Self.playlistType,
                            text: HLSMultivariantPlaylist.render(broadcast.renditions, video: video, bandwidth: bandwidth, query: query))
    }

    private func list() -> HTTPResponse {
        var w = JSONWriter(capacity: 256)
        w.beginObject()
        w.key("channels")
        w.beginArray()
        for channel in channels.summaries {
            w.beginObject()
            w.field("name", channel.name)
            w.field("state", channel.state)
            w.key("broadcast")
            if let id = channel.broadcast { w.string(id) } else { w.null() }
            w.key("startedAt")
            if let startedAt = channel.startedAt { w.string(startedAt.iso8601) } else { w.null() }
            w.field("viewers", integer: channel.viewers)
            w.field("finals", integer: channel.finals)
            w.key("languages")
            w.beginArray()
            for language in channel.languages { w.string(language) }
            w.endArray()
            w.endObject()
        }
        w.endArray()
        w.endObject()
        return HTTPResponse(status: 200, contentType: "application/json", body: w.bytes)
    }

    private func broadcasts(_ name: String) -> HTTPResponse {
        guard let all = channels.broadcasts(of: name) else { return .plain(status: 404) }
        var w = JSONWriter(capacity: 256)
        w.beginObject()
        w.field("channel", name)
        w.key("broadcasts")
        w.beginArray()
        for broadcast in all {
            w.beginObject()
            w.field("id", broadcast.id)
            w.field("state", broadcast.state.rawValue)
            w.field("startedAt", broadcast.startedAt.iso8601)
            w.key("endedAt")
            if let endedAt = broadcast.endedAt { w.string(endedAt.iso8601) } else { w.null() }
            w.field("finals", integer: broadcast.finals)
            w.endObject()
        }
        w.endArray()
        w.endObject()
        return HTTPResponse(status: 200, contentType: "application/json", body: w.bytes)
    }

    /// `text` for a URI's query: unreserved characters as they are, the rest as %XX.
    static func percentEncoded(_ text: String) -> String {
        var out = ""
        for byte in text.utf8 {
            switch byte {
            case UInt8(ascii: "A")...UInt8(ascii: "Z"), UInt8(ascii: "a")...UInt8(ascii: "z"),
                 UInt8(ascii: "0")...UInt8(ascii: "9"), UInt8(ascii: "-"), UInt8(ascii: "."), UInt8(ascii: "_"),
                 UInt8(ascii: "~"):
                out.append(Character(UnicodeScalar(byte)))
            default:
                let hex = Array("0123456789ABCDEF")
                out += "%" + String(hex[Int(byte >> 4)]) + String(hex[Int(byte & 15)])
            }
        }
        return out
    }
}
