/// How a broadcast's captions are cut into HLS WebVTT segments.
public struct HLSConfiguration: Sendable, Hashable {
    /// Seconds of the audio timeline per segment (`#EXT-X-TARGETDURATION` is this, rounded up).
    public var segmentSeconds: Double
    /// Segments listed in the live playlist (a rolling window).
    public var windowSegments: Int
    /// The program's MPEG-TS time (seconds) of audio time 0: every segment's
    /// `X-TIMESTAMP-MAP=MPEGTS:<90 kHz ticks>,LOCAL:00:00:00.000`. Set it to the video's
    /// presentation time of the moment the captions' audio starts.
    public var mpegtsOffset: Double

    public init(segmentSeconds: Double = 6, windowSegments: Int = 10, mpegtsOffset: Double = 0) {
        self.segmentSeconds = segmentSeconds.isFinite ? min(max(segmentSeconds, 1), 60) : 6
        self.windowSegments = min(max(windowSegments, 3), 1000)
        self.mpegtsOffset = mpegtsOffset.isFinite ? max(0, mpegtsOffset) : 0
    }

    /// `#EXT-X-TARGETDURATION`: whole seconds, at least every segment's duration.
    public var targetDuration: Int { Int(segmentSeconds.rounded(.up)) }

    /// The `X-TIMESTAMP-MAP` value: the offset in 90 kHz ticks, modulo 2^33 as MPEG-TS wraps.
    public var mpegtsTicks: Int64 {
        let ticks = Int64((mpegtsOffset * 90_000).rounded())
        return ticks % (Int64(1) << 33)
    }
}

/// A broadcast's live HLS subtitle track: a media playlist of WebVTT segments, made from
/// settled caption cues (`CaptionCueBuilder`). A pure value: the server feeds it cues and how
/// far the captions are settled, and serves what it renders.
///
/// - Segment `k` covers `[k·D, (k+1)·D)` of the audio timeline and has media sequence number
///   `sequenceBase + k`. It is published once no cue that starts before its end can still come
///   (`advance(settledThrough:)`), and never changes after that (CDNs may cache it forever).
/// - A segment holds every cue that overlaps it, with its times unchanged: a cue that spans a
///   boundary is in both segments, as HLS requires.
/// - The playlist lists the latest `windowSegments` published segments, each with its
///   `#EXT-X-PROGRAM-DATE-TIME` (`startedAt` + its start); `end(duration:)` publishes the rest,
///   the last one as long as the audio, and adds `#EXT-X-ENDLIST`.
/// - Segments that left the window are kept a while longer (another window) for players and
///   caches that are behind, then forgotten.
/// - Each segment ends with a blank line, so that segments read back to back as one stream
///   still parse as WebVTT.
public struct HLSCaptionTrack: Sendable {
    public let configuration: HLSConfiguration
    /// Media sequence number of segment 0.
    public let sequenceBase: Int
    /// Wall-clock time of audio time 0.
    public let startedAt: UTCTime
    /// Segments published so far (0..<published).
    public private(set) var published = 0
    /// Whether the broadcast is over (`#EXT-X-ENDLIST`).
    public private(set) var isEnded = false

    private struct Segment: Sendable {
        var sequence: Int
        var start: Double
        var duration: Double
        var body: String
    }

    /// Published segments still served, oldest first.
    private var segments: [Segment] = []
    /// Cues that may still be in segments not yet published, in time order.
    private var cues: [CaptionCue] = []
    /// The end of the last cue given (the last segment reaches at least this far).
    private var lastCueEnd = 0.0

    public init(configuration: HLSConfiguration = HLSConfiguration(), sequenceBase: Int, startedAt: UTCTime) {
        self.configuration = configuration
        self.sequenceBase = max(0, sequenceBase)
        self.startedAt = startedAt
    }

    /// Cues now settled, in time order (each once).
    public mutating func add(_ settled: [CaptionCue]) {
        guard !isEnded else { return }
        for cue in settled {
            cues.append(cue)
            lastCueEnd = max(lastCueEnd, cue.range.end)
        }
    }

    /// Every cue that starts before `time` has been given: publishes the segments that end by
    /// then. Returns how many were published.
    @discardableResult
    public mutating func advance(settledThrough time: Double) -> Int {
        guard !isEnded, time.isFinite else { return 0 }
        let D = configuration.segmentSeconds
        var count = 0
        // A bound, so that an absurd time cannot make a loop of billions.
        while Double(published + 1) * D <= time && count < 100_000 {
            publish(duration: D)
            count += 1
        }
        return count
    }

    /// The broadcast is over after `duration` seconds of audio: the remaining segments are
    /// published (the last one as long as what is left, covering every cue's start) and the
    /// playlist ends.
    public mutating func end(duration: Double) {
        guard !isEnded else { return }
        let D = configuration.segmentSeconds
        let total = max(duration.isFinite ? duration : 0, cues.last?.range.start ?? 0, Double(published) * D)
        var count = 0
        while (Double(published) * D < total || published == 0) && count < 100_000 {
            let remaining = total - Double(published) * D
            publish(duration: min(D, max(remaining, 0.001)))
            count += 1
        }
        isEnded = true
    }

    /// Media sequence number of the first segment in the playlist.
    public var mediaSequence: Int { sequenceBase + max(0, published - configuration.windowSegments) }

    /// The media playlist. `query` (e.g. `?token=T`, or empty) is appended to every segment's URI.
    public func playlist(query: String = "") -> String {
        var out = "#EXTM3U\n#EXT-X-VERSION:3\n"
        out += "#EXT-X-TARGETDURATION:\(configuration.targetDuration)\n"
        out += "#EXT-X-MEDIA-SEQUENCE:\(mediaSequence)\n"
        for segment in segments where segment.sequence >= mediaSequence {
            let wall = UTCTime(millisecondsSince1970: startedAt.millisecondsSince1970
                               + (CoreMath.nearest(segment.start * 1000) ?? 0))
            out += "#EXT-X-PROGRAM-DATE-TIME:\(wall.iso8601)\n"
            out += "#EXTINF:\(Self.decimal(segment.duration)),\n"
            out += "captions/\(segment.sequence).vtt\(query)\n"
        }
        if isEnded { out += "#EXT-X-ENDLIST\n" }
        return out
    }

    /// The WebVTT text of segment `sequence`, if it is published and still kept.
    public func segment(_ sequence: Int) -> String? {
        segments.first { $0.sequence == sequence }?.body
    }

    // MARK: -

    /// Seconds with three decimals ("6.000").
    static func decimal(_ seconds: Double) -> String {
        let ms = CoreMath.nearest(max(0, seconds) * 1000) ?? 0
        let fraction = String(ms % 1000)
        return "\(ms / 1000)." + String(repeating: "0", count: 3 - fraction.count) + fraction
    }

    private mutating func publish(duration: Double) {
        let D = configuration.segmentSeconds
        let start = Double(published) * D
        let end = start + duration
        var body = "WEBVTT\nX-TIMESTAMP-MAP=MPEGTS:\(configuration.mpegtsTicks),LOCAL:00:00:00.000\n"
        for cue in cues where cue.range.start < end && (cue.range.end > start || cue.range.start >= start) {
            body += Captions.webVTTCue(cue)
        }
        // A blank line after the last cue: a reader that takes the segments as one stream
        // (ffmpeg does) sees the next segment's header as a block of its own, not cue text.
        body += "\n"
        segments.append(Segment(sequence: sequenceBase + published, start: start, duration: duration, body: body))
        published += 1
        // Cues that end by the next segment's start are in no later segment.
        cues.removeAll { $0.range.end <= end && $0.range.start < end }
        let keep = 2 * configuration.windowSegments
        if segments.count > keep { segments.removeFirst(segments.count - keep) }
    }
}

/// A multivariant HLS playlist for a video with a broadcast's captions: one subtitles
/// rendition per language the broadcast carries (`Renditions`; `LANGUAGE` where known, so that
/// players list them by language), the publisher's own the default, and the video as its one
/// variant (a player plays no subtitles without one).
public enum HLSMultivariantPlaylist {
    /// `video`: the video's playlist URI, as the player should load it; `query`: what goes on
    /// every rendition's URI after its `language` (a token, "&token=…").
    public static func render(_ renditions: Renditions, video: String, bandwidth: Int, query: String = "") -> String {
        var out = "#EXTM3U\n#EXT-X-VERSION:3\n"
        let names = renditions.names
        for (index, name) in (names.isEmpty ? [""] : names).enumerated() {
            let original = name == Renditions.originalName || (index > 0 && name == renditions.original)
            let title = name.isEmpty ? "Captions" : name == Renditions.originalName ? "Original" : original ? "\(name) (original)" : name
            var line = "#EXT-X-MEDIA:TYPE=SUBTITLES,GROUP-ID=\"subs\",NAME=\"\(title)\""
            if !name.isEmpty && name != Renditions.originalName { line += ",LANGUAGE=\"\(name)\"" }
            let uri = name.isEmpty ? "captions.m3u8" + (query.isEmpty ? "" : "?" + query.dropFirst())
                : "captions.m3u8?language=\(name)" + query
            line += ",DEFAULT=\(index == 0 ? "YES" : "NO"),AUTOSELECT=YES,URI=\"\(uri)\"\n"
            out += line
        }
        out += "#EXT-X-STREAM-INF:BANDWIDTH=\(max(1, bandwidth)),SUBTITLES=\"subs\"\n\(video)\n"
        return out
    }

    /// Whether `uri` can stand on a playlist's line: no line breaks, quotes or other controls.
    public static func isUsable(_ uri: String) -> Bool {
        !uri.isEmpty && uri.unicodeScalars.allSatisfy { $0.value >= 0x20 && $0.value != 0x7F && $0 != "\"" }
    }
}
