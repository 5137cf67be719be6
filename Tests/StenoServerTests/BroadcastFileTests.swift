import Foundation
import StenoCore
import Testing
@testable import StenoServer
import StenoTestSupport

/// A channel's SCC and TTML files from a real server, read back as a broadcaster's tools
/// would: ffmpeg (its SCC demuxer and CEA-608 decoder) and ttconv (SCC and TTML/IMSC reader,
/// from .venv, which scripts/bootstrap.sh test installs). Every word of the finals comes back,
/// in order, at the time it was said.
@Suite struct BroadcastFileTests {
    static let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
        .deletingLastPathComponent().path

    /// Runs a program to its end; its standard output, or an error with its standard error.
    static func run(_ program: String, _ arguments: [String]) throws -> String {
        let ran = try programOutput(program, arguments)
        guard ran.status == 0 else {
            throw ProgramFailed(description: "\(program) \(arguments.joined(separator: " ")) failed: \(ran.stderr)")
        }
        return ran.stdout
    }

    struct ProgramFailed: Error, CustomStringConvertible {
        var description: String
    }

    /// An SRT file's cues: start, end and text.
    static func cues(ofSRT srt: String) -> [(start: Double, end: Double, text: String)] {
        srt.replacingOccurrences(of: "\r\n", with: "\n").components(separatedBy: "\n\n").compactMap { block in
            let lines = block.split(separator: "\n").map(String.init)
            guard let timing = lines.firstIndex(where: { $0.contains("-->") }) else { return nil }
            let times = lines[timing].components(separatedBy: " --> ").map { stamp -> Double in
                let parts = stamp.trimmingCharacters(in: .whitespaces).replacingOccurrences(of: ",", with: ".").split(separator: ":")
                return parts.reduce(0) { $0 * 60 + (Double($1) ?? 0) }
            }
            var text = lines[(timing + 1)...].joined(separator: " ")
            // ffmpeg marks its cues up: position, font, hard spaces.
            for markup in [#"\{[^}]*\}"#, #"<[^>]*>"#, #"\\h"#] {
                text = text.replacingOccurrences(of: markup, with: " ", options: .regularExpression)
            }
            return (times[0], times[1], text)
        }
    }

    static func words(_ text: String) -> [String] {
        text.lowercased().split { !$0.isLetter && !$0.isNumber && $0 != "'" }.map(String.init)
    }

    /// Words of roll-up captions as they scroll: each cue's last line is what was new.
    static func rolledWords(_ cues: [(start: Double, end: Double, text: String)], srt: String) -> [String] {
        srt.replacingOccurrences(of: "\r\n", with: "\n").components(separatedBy: "\n\n").flatMap { block -> [String] in
            let lines = block.split(separator: "\n").map(String.init)
            guard lines.contains(where: { $0.contains("-->") }), let last = lines.last else { return [] }
            return words(last.replacingOccurrences(of: #"\{[^}]*\}|<[^>]*>|\\h"#, with: " ", options: .regularExpression))
        }
    }

    @Test func sccAndTTMLReadBackByFFmpegAndTtconv() throws {
        let input = TestInput.pcm16k()
        let server = try LiveServer()
        let publisher = try server.connect()
        let ready = try publisher.start(input, extra: #""channel":"tower""#)
        try publisher.send(audio: input.messages, of: input)
        try publisher.end()
        expectEndedNormally(publisher, audio: input.duration, "the publisher")
        let finals = publisher.events.finals.map { final in
            RecognitionResult(range: TimeRange(start: final.start, end: final.end), text: final.text,
                              words: final.words.map { Word($0.word, range: TimeRange(start: $0.start, end: $0.end), confidence: 1) })
        }
        let spoken = finals.flatMap { Self.words($0.text) }
        #expect(spoken.count >= 10, "\(finals)")

        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("steno-broadcast-\(getpid())").path
        try FileManager.default.createDirectory(atPath: dir, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: dir) }
        func fetch(_ path: String, as file: String) throws -> String {
            let response = try server.get(path)
            #expect(response.status == 200, "\(path): \(response.status)")
            try Data(response.body).write(to: URL(fileURLWithPath: dir + "/" + file))
            return dir + "/" + file
        }
        let scc = try fetch("/v1/channels/tower/captions.scc", as: "popon.scc")
        let rollUp = try fetch("/v1/channels/tower/captions.scc?mode=rollup", as: "rollup.scc")
        let ttml = try fetch("/v1/channels/tower/captions.ttml", as: "captions.ttml")
        let wall = try fetch("/v1/channels/tower/captions.ttml?clock=wall", as: "wall.ttml")
        #expect(try server.get("/v1/channels/tower/captions.scc").header("content-type")?.hasPrefix("text/x-scc") == true)
        #expect(try server.get("/v1/channels/tower/captions.ttml").header("content-type")?.hasPrefix("application/ttml+xml") == true)
        #expect(try server.get("/v1/channels/tower/captions.ttml?mode=rollup").status == 400)
        #expect(try server.get("/v1/channels/tower/captions.scc?mode=paint").status == 400)

        // ffmpeg: pop-on and roll-up SCC.
        let ffmpegPopOn = try Self.run("/usr/bin/ffmpeg", ["-hide_banner", "-loglevel", "error", "-i", scc, "-f", "srt", "-"])
        let popOnCues = Self.cues(ofSRT: ffmpegPopOn)
        #expect(popOnCues.flatMap { Self.words($0.text) } == spoken, "ffmpeg, pop-on:\n\(ffmpegPopOn)")
        let ffmpegRollUp = try Self.run("/usr/bin/ffmpeg", ["-hide_banner", "-loglevel", "error", "-i", rollUp, "-f", "srt", "-"])
        #expect(Self.rolledWords(Self.cues(ofSRT: ffmpegRollUp), srt: ffmpegRollUp) == spoken, "ffmpeg, roll-up:\n\(ffmpegRollUp)")

        // ttconv: SCC (read pair by pair, a frame each: the caption shows when its words were
        // said) and TTML.
        let tt = Self.root + "/.venv/bin/tt"
        _ = try Self.run(tt, ["convert", "-i", scc, "-o", dir + "/scc.srt"])
        let ttconvSCC = Self.cues(ofSRT: try String(contentsOfFile: dir + "/scc.srt", encoding: .utf8))
        #expect(ttconvSCC.flatMap { Self.words($0.text) } == spoken, "ttconv, SCC: \(ttconvSCC)")
        // Each caption shows as its first word is said; one whose pairs cannot all be sent
        // before (at the very start, or right after another) shows a little late, never early.
        let sccCues = Captions.cues(finals, layout: CaptionLayout().cea608)
        #expect(ttconvSCC.count == sccCues.count)
        let lateness = zip(ttconvSCC, sccCues).map { $0.start - $1.range.start }.sorted()
        #expect(lateness.allSatisfy { $0 > -0.05 && $0 < 1.5 }, "\(lateness)")
        #expect(lateness[lateness.count / 2] < 0.05, "\(lateness)")
        let firstWord = try #require(finals.first?.range.start)
        _ = try Self.run(tt, ["convert", "-i", ttml, "-o", dir + "/ttml.srt"])
        let ttconvTTML = Self.cues(ofSRT: try String(contentsOfFile: dir + "/ttml.srt", encoding: .utf8))
        #expect(ttconvTTML.flatMap { Self.words($0.text) } == spoken, "ttconv, TTML: \(ttconvTTML)")
        let vtt = Captions.cues(finals, layout: CaptionLayout())
        #expect(ttconvTTML.count == vtt.count)
        for (read, cue) in zip(ttconvTTML, vtt) {
            #expect(abs(read.start - cue.range.start) < 0.002 && abs(read.end - cue.range.end) < 0.002)
        }
        // On the wall clock: the same cues, at the time of day they were said.
        _ = try Self.run(tt, ["convert", "-i", wall, "-o", dir + "/wall.srt"])
        let ttconvWall = Self.cues(ofSRT: try String(contentsOfFile: dir + "/wall.srt", encoding: .utf8))
        // startedAt is `YYYY-MM-DDTHH:MM:SS.mmmZ`: the time of day is after the T.
        let startedAt = try #require(ready.string("startedAt"))
        let day = startedAt.split(separator: "T")[1].dropLast().split(separator: ":").reduce(0) { $0 * 60 + (Double($1) ?? 0) }
        #expect(ttconvWall.count == vtt.count)
        #expect(abs((ttconvWall.first?.start ?? 0) - (day + firstWord)) < 0.002, "\(ttconvWall.first?.start ?? -1)")
    }
}
