import Foundation
import StenoTestSupport
import Testing
@testable import StenoCore

/// The HLS subtitle track as a pure value: segments published as captions settle, cues in
/// every segment they overlap, a rolling window, the end of the broadcast.
@Suite struct HLSCaptionTrackTests {
    static let start = UTCTime(millisecondsSince1970: 1_764_443_233_211)  // 2025-11-29T19:07:13.211Z

    static func cue(_ start: Double, _ end: Double, _ text: String) -> CaptionCue {
        CaptionCue(range: TimeRange(start: start, end: end), lines: [text])
    }

    @Test func segmentsArePublishedAsCaptionsSettle() {
        var track = HLSCaptionTrack(configuration: HLSConfiguration(segmentSeconds: 6, windowSegments: 3, mpegtsOffset: 10),
                                    sequenceBase: 500, startedAt: Self.start)
        #expect(track.playlist() == """
            #EXTM3U
            #EXT-X-VERSION:3
            #EXT-X-TARGETDURATION:6
            #EXT-X-MEDIA-SEQUENCE:500

            """)
        track.add([Self.cue(1, 2.5, "Hello."), Self.cue(5.5, 7, "Across the boundary & <more>")])
        #expect(track.advance(settledThrough: 5.99) == 0)
        #expect(track.advance(settledThrough: 12.5) == 2)
        #expect(track.segment(500) == """
            WEBVTT
            X-TIMESTAMP-MAP=MPEGTS:900000,LOCAL:00:00:00.000

            00:00:01.000 --> 00:00:02.500
            Hello.

            00:00:05.500 --> 00:00:07.000
            Across the boundary &amp; &lt;more&gt;


            """)
        // The cue across the boundary is in both segments, with its times unchanged.
        #expect(track.segment(501) == """
            WEBVTT
            X-TIMESTAMP-MAP=MPEGTS:900000,LOCAL:00:00:00.000

            00:00:05.500 --> 00:00:07.000
            Across the boundary &amp; &lt;more&gt;


            """)
        #expect(track.segment(502) == nil, "not published yet")
        #expect(track.playlist(query: "?token=t") == """
            #EXTM3U
            #EXT-X-VERSION:3
            #EXT-X-TARGETDURATION:6
            #EXT-X-MEDIA-SEQUENCE:500
            #EXT-X-PROGRAM-DATE-TIME:2025-11-29T19:07:13.211Z
            #EXTINF:6.000,
            captions/500.vtt?token=t
            #EXT-X-PROGRAM-DATE-TIME:2025-11-29T19:07:19.211Z
            #EXTINF:6.000,
            captions/501.vtt?token=t

            """)
    }

    @Test func theWindowRollsAndTheEndIsMarked() {
        var track = HLSCaptionTrack(configuration: HLSConfiguration(segmentSeconds: 4, windowSegments: 3), sequenceBase: 7,
                                    startedAt: Self.start)
        track.advance(settledThrough: 20)
        #expect(track.published == 5)
        #expect(track.mediaSequence == 9)
        let before = track.segment(9)
        track.add([Self.cue(21, 22.5, "last words")])
        track.end(duration: 22.3)
        #expect(track.isEnded)
        #expect(track.published == 6)
        #expect(track.segment(9) == before, "a published segment never changes")
        let playlist = track.playlist()
        #expect(playlist.hasSuffix("#EXTINF:2.300,\ncaptions/12.vtt\n#EXT-X-ENDLIST\n"), "\(playlist)")
        #expect(playlist.components(separatedBy: "#EXTINF").count - 1 == 3)
        #expect(playlist.contains("#EXT-X-MEDIA-SEQUENCE:10\n"))
        #expect(track.segment(12)?.contains("last words") == true)
        // Nothing changes after the end.
        track.add([Self.cue(30, 31, "late")])
        track.advance(settledThrough: 100)
        #expect(track.playlist() == playlist)
    }

    @Test func anEmptyBroadcastStillHasOneSegment() {
        var track = HLSCaptionTrack(sequenceBase: 0, startedAt: Self.start)
        track.end(duration: 0)
        #expect(track.playlist().contains("#EXTINF:0.001,\ncaptions/0.vtt\n#EXT-X-ENDLIST\n"))
    }

    @Test func theMpegtsClockWraps() {
        #expect(HLSConfiguration(mpegtsOffset: 1.4).mpegtsTicks == 126_000)
        #expect(HLSConfiguration(mpegtsOffset: 95_443.7176888).mpegtsTicks < 1 << 33)
        #expect(HLSConfiguration(segmentSeconds: 2.5).targetDuration == 3)
    }

    /// Cues from the cue builder, fed as a channel would feed them, give every cue to the
    /// segments it overlaps, and the segments' cues are the caption file's.
    @Test func segmentsHoldTheCaptionFilesCues() {
        var random = SplitMix(seed: 99)
        for round in 0..<100 {
            let finals = CaptionRulesTests.randomFinals(&random)
            var builder = CaptionCueBuilder()
            var track = HLSCaptionTrack(configuration: HLSConfiguration(segmentSeconds: Double(2 + round % 6)),
                                        sequenceBase: round, startedAt: Self.start)
            for final in finals {
                track.add(builder.settle(before: final.range.start))
                track.advance(settledThrough: min(max(final.range.start, builder.floor), builder.pendingStart ?? .infinity))
                track.add(builder.add(final))
            }
            track.add(builder.finish())
            track.end(duration: (finals.last?.range.end ?? 0) + 0.5)
            let file = Captions.cues(finals)
            var seen: [String] = []
            for k in 0..<track.published {
                guard let body = track.segment(round + k) else { continue }  // no longer kept
                let D = track.configuration.segmentSeconds
                for cue in file where cue.range.start < Double(k + 1) * D && cue.range.end > Double(k) * D {
                    #expect(body.contains(Captions.webVTTCue(cue)), "segment \(k) lacks \(cue)")
                }
                for block in body.components(separatedBy: "\n\n").dropFirst().map({ $0.trimmingCharacters(in: .newlines) }) where !block.isEmpty && !seen.contains(block) {
                    seen.append(block)
                }
            }
            if track.published <= 2 * track.configuration.windowSegments {
                #expect(seen.count == file.count)
            }
        }
    }
}
