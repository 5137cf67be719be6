import Foundation
import StenoCore
import StenoTestSupport
import Testing

/// `steno listen --obs` and `--youtube-url` against faithful fakes of obs-websocket 5 and of
/// YouTube Live's caption ingestion (scripts/fakes/, which record what they were given), with
/// a real server, real speech and `steno send` publishing. The real OBS, under Xvfb with an
/// RTMP server, is `make broadcast-check` (scripts/broadcast/).
@Suite struct BroadcastBridgeTests {
    static let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
        .deletingLastPathComponent().path

    /// A fake from scripts/fakes/, on a port of its own, recording into a file of its own.
    final class Fake {
        let command: StenoCommand
        let port: Int
        let record: String

        init(_ script: String, _ arguments: [String], port: Int? = nil) throws {
            record = FileManager.default.temporaryDirectory.appendingPathComponent("steno-\(script)-\(getpid())-\(UUID().uuidString).jsonl").path
            let port = try port ?? freeLoopbackPort()
            self.port = port
            command = try StenoCommand([BroadcastBridgeTests.root + "/scripts/fakes/" + script, "--port", String(port),
                                        "--record", record, "--quiet"] + arguments,
                                       executable: "/usr/bin/python3")
            try command.waitForStdout(lines: 1)
            #expect(command.stdout.lines.first == "listening \(port)")
        }

        /// What it recorded, one JSON object per line.
        var records: [[String: Any]] {
            ((try? String(contentsOfFile: record, encoding: .utf8)) ?? "").split(separator: "\n").compactMap {
                try? JSONSerialization.jsonObject(with: Data($0.utf8)) as? [String: Any]
            }
        }

        func stop() {
            command.interrupt()
            _ = try? command.finish(timeout: 10)
            try? FileManager.default.removeItem(atPath: record)
        }
    }

    static func words(_ text: String) -> [String] {
        text.lowercased().split { !$0.isLetter && !$0.isNumber && $0 != "'" }.map(String.init)
    }

    /// Publishes `TestAudio.clip` on `channel` as fast as the server takes it; its finals' words.
    static func publish(_ channel: String) throws -> [String] {
        let publisher = try StenoCommand.run(["send", TestAudio.clip, "--server", CLIServer.shared.url, "--channel", channel,
                                              "--fast", "--encoding", "pcm"])
        #expect(publisher.status == 0, "\(publisher.stderr)")
        return publisher.stdout.split(separator: "\n").flatMap { line in
            words(String(line.split(separator: "]", maxSplits: 1).last ?? ""))
        }
    }

    @Test func obsGetsTheCaptionsPacedWithinCEA608AndAgainAfterARestart() throws {
        let channel = "obs-\(getpid())"
        var obs = try Fake("obs_websocket.py", ["--password", "hunter2", "--streaming"])
        defer { obs.stop() }
        let listener = try StenoCommand(["listen", "--channel", channel, "--server", CLIServer.shared.url,
                                         "--obs", "ws://127.0.0.1:\(obs.port)", "--retry-max", "0.5"],
                                        environment: ["STENO_OBS_PASSWORD": "hunter2"])
        try listener.waitForStderr("OBS is streaming")
        let spoken = try Self.publish(channel)
        #expect(spoken.count >= 5)
        func shown(_ fake: Fake) -> [[String: Any]] { fake.records.filter { ($0["text"] as? String)?.isEmpty == false } }
        try listener.wait(for: "every word in OBS", timeout: 90) {
            shown(obs).flatMap { Self.words($0["text"] as? String ?? "") }.count >= spoken.count
        }
        let captions = shown(obs)
        #expect(captions.flatMap { Self.words($0["text"] as? String ?? "") } == spoken)
        for caption in captions {
            // Laid out for 608: what OBS keeps is what was sent, in at most 2 rows of 32.
            let rows = caption["rows"] as? [String] ?? []
            #expect(caption["kept"] as? String == caption["text"] as? String)
            #expect(rows.count <= 2 && rows.allSatisfy { $0.count <= 32 }, "\(rows)")
            #expect((caption["text"] as? String)?.split(separator: "\n").map(String.init) == rows)
        }
        // Each caption stays up at least a second (the pacing), though the finals came at once.
        let times = captions.compactMap { $0["t"] as? Double }
        #expect(zip(times, times.dropFirst()).allSatisfy { $1 - $0 >= 0.9 }, "\(times)")
        // Nothing new for 7 s: the screen is cleared.
        try listener.wait(for: "the clear", timeout: 30) { obs.records.last?["text"] as? String == "" }

        // OBS restarts (same port): the listener connects again and the next captions go in.
        let port = obs.port
        obs.stop()
        try listener.waitForStderr("trying again")
        obs = try Fake("obs_websocket.py", ["--password", "hunter2", "--streaming"], port: port)
        try listener.waitForStderr("connected to OBS again", timeout: 30)
        let again = try Self.publish(channel)
        try listener.wait(for: "the words after the restart", timeout: 90) {
            shown(obs).flatMap { Self.words($0["text"] as? String ?? "") }.count >= again.count
        }
        #expect(shown(obs).flatMap { Self.words($0["text"] as? String ?? "") } == again)
        listener.interrupt()
        #expect(try listener.finish() == 0, "\(listener.stderr.text)")
    }

    @Test func obsNotStreamingIsWaitedOutQuietly() throws {
        let channel = "obs-idle-\(getpid())"
        let obs = try Fake("obs_websocket.py", ["--streaming-after", "4"])
        defer { obs.stop() }
        let listener = try StenoCommand(["listen", "--channel", channel, "--server", CLIServer.shared.url,
                                         "--obs", "ws://127.0.0.1:\(obs.port)", "--live-words"])
        try listener.waitForStderr("OBS is not streaming")
        // Captions while OBS does not stream are not sent (OBS would refuse them) …
        _ = try Self.publish(channel)
        #expect(obs.records.isEmpty, "\(obs.records)")
        // … and once it streams, the next ones go in.
        try listener.waitForStderr("OBS is streaming", timeout: 30)
        let spoken = try Self.publish(channel)
        // Live words: the last rows of what was said, up to its last word.
        try listener.wait(for: "live words in OBS", timeout: 90) {
            let last = Self.words(obs.records.last { ($0["text"] as? String)?.isEmpty == false }?["text"] as? String ?? "")
            return !last.isEmpty && last == Array(spoken.suffix(last.count))
        }
        #expect(obs.records.allSatisfy { $0["rejected"] == nil }, "\(obs.records)")
        listener.interrupt()
        #expect(try listener.finish() == 0, "\(listener.stderr.text)")
        #expect(!listener.stderr.text.contains("warning"), "\(listener.stderr.text)")
    }

    @Test func aWrongOrMissingOBSPasswordIsAClearErrorAndExit3() throws {
        let obs = try Fake("obs_websocket.py", ["--password", "right", "--streaming"])
        defer { obs.stop() }
        let wrong = try StenoCommand.run(["listen", "--channel", "any", "--server", CLIServer.shared.url,
                                          "--obs", "ws://127.0.0.1:\(obs.port)", "--obs-password", "wrong"])
        #expect(wrong.status == 3)
        #expect(wrong.stderr.contains("OBS refused the password (--obs-password)"), "\(wrong.stderr)")
        let missing = try StenoCommand.run(["listen", "--channel", "any", "--server", CLIServer.shared.url,
                                            "--obs", "ws://127.0.0.1:\(obs.port)"])
        #expect(missing.status == 3)
        #expect(missing.stderr.contains("OBS asks for a password: give --obs-password"), "\(missing.stderr)")
    }

    @Test func youtubeGetsEachCaptionOnceInSequenceThroughFailures() throws {
        let channel = "youtube-\(getpid())"
        // The first two POSTs are refused with 503, the next one is taken but never answered;
        // YouTube's clock runs 30 s ahead of this machine's.
        let youtube = try Fake("youtube_ingest.py", ["--cid", "KEY", "--fail-first", "2", "--drop-first", "1",
                                                     "--clock-offset", "30", "--strict-seq"])
        defer { youtube.stop() }
        let listener = try StenoCommand(["listen", "--channel", channel, "--server", CLIServer.shared.url,
                                         "--youtube-url", "http://127.0.0.1:\(youtube.port)/closedcaption?cid=KEY"])
        try listener.waitForStderr("following channel")
        let spoken = try Self.publish(channel)
        func taken() -> [[String: Any]] { youtube.records.filter { $0["rejected"] == nil } }
        try listener.wait(for: "every word posted", timeout: 120) {
            taken().flatMap { ($0["text"] as? [String] ?? []).flatMap(Self.words) }.count >= spoken.count
        }
        let first = taken()
        #expect(first.flatMap { ($0["text"] as? [String] ?? []).flatMap(Self.words) } == spoken)
        #expect(youtube.records.filter { $0["rejected"] != nil }.count == 2)
        // A second broadcast on the channel, once YouTube has said what its clock is.
        let again = try Self.publish(channel)
        try listener.wait(for: "the second broadcast posted", timeout: 120) {
            taken().flatMap { ($0["text"] as? [String] ?? []).flatMap(Self.words) }.count >= spoken.count + again.count
        }
        let posts = taken()
        #expect(posts.flatMap { ($0["text"] as? [String] ?? []).flatMap(Self.words) } == spoken + again)
        // One more each, starting at 1, the same on every retry: nothing twice.
        #expect(posts.compactMap { $0["seq"] as? Int } == Array(1...posts.count))
        // Times on YouTube's clock: the words were spoken moments ago, not 30 s in the past.
        let skews = posts.dropFirst(first.count).flatMap { $0["skew"] as? [Double] ?? [] }
        #expect(!skews.isEmpty && skews.allSatisfy { abs($0) < 15 }, "\(skews)")
        listener.interrupt()
        #expect(try listener.finish() == 0, "\(listener.stderr.text)")
        #expect(listener.stderr.text.contains("YouTube did not take captions (HTTP 503)"), "\(listener.stderr.text)")
    }

    @Test func aRefusedYouTubeURLIsAClearErrorAndExit3() throws {
        let channel = "youtube-bad-\(getpid())"
        let youtube = try Fake("youtube_ingest.py", ["--cid", "KEY"])
        defer { youtube.stop() }
        let listener = try StenoCommand(["listen", "--channel", channel, "--server", CLIServer.shared.url,
                                         "--youtube-url", "http://127.0.0.1:\(youtube.port)/closedcaption?cid=WRONG"])
        try listener.waitForStderr("following channel")
        _ = try Self.publish(channel)
        #expect(try listener.finish(timeout: 60) == 3)
        #expect(listener.stderr.text.contains("YouTube refused the caption ingestion URL (HTTP 403)"), "\(listener.stderr.text)")
    }
}
