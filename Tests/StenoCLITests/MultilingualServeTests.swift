import Foundation
import StenoCore
import StenoTestSupport
import Testing

/// `steno serve` with its defaults — tiny.en, and the multilingual Whisper base that
/// scripts/bootstrap.sh installs — and `steno send`: English stays on tiny.en; Italian spoken by
/// festival (festvox-italp16k) is found with `--language auto`, translated with `--translate en`,
/// heard in its lane with `--languages it,en` and refused (`low_confidence`, no final) with
/// `--languages ru,en`, and, translated on a channel, followed in English or in Italian
/// (`steno listen --language`, caption files, HLS renditions, read by ffmpeg as a player);
/// `/v1/models` and `steno models` list each model's languages. One server (two models loaded)
/// for all of it.
@Suite(.serialized) struct MultilingualServeTests {
    static let italian = "Buongiorno a tutti. Oggi parliamo del tempo e della città di Roma."

    /// The Italian sentence spoken by festival at 16 kHz, as a WAV file.
    static func italianSpeech() throws -> String {
        let folder = FileManager.default.temporaryDirectory.appendingPathComponent("steno-it-\(getpid())").path
        try FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: true)
        let text = folder + "/it.txt"
        let wav = folder + "/it.wav"
        try Data(italian.data(using: .isoLatin1)!).write(to: URL(fileURLWithPath: text))
        let festival = try programOutput("/usr/bin/text2wave", ["-F", "16000", "-eval", "(voice_lp_diphone)", "-o", wav, text])
        #expect(festival.status == 0, "festival's Italian voice (festvox-italp16k): scripts/bootstrap.sh test installs it. \(festival.stderr)")
        return wav
    }

    /// A player's reading of `master` (a channel's master.m3u8): ffmpeg's HLS demuxer (whose
    /// subtitle renditions are "experimental") lists a rendition per language of `said` beside a
    /// short video (made here, read from a file) and reads each one's captions through it: `said`'s
    /// word in its own language's, not in the other's.
    static func playerReads(master: String, _ said: [String: String]) throws {
        let folder = FileManager.default.temporaryDirectory.appendingPathComponent("steno-video-\(getpid())").path
        try FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: folder) }
        let made = try programOutput("/usr/bin/ffmpeg", ["-nostdin", "-loglevel", "error", "-f", "lavfi", "-i", "testsrc=d=6:s=160x120:r=10",
                                                         "-c:v", "mpeg2video", "-f", "hls", "-hls_time", "2", "-hls_playlist_type", "vod",
                                                         folder + "/video.m3u8"])
        #expect(made.status == 0, "ffmpeg (scripts/bootstrap.sh test installs it): \(made.stderr)")
        let url = master + "?video=file://" + folder + "/video.m3u8"
        let reader = ["-strict", "experimental", "-protocol_whitelist", "file,http,tcp"]
        let probe = try programOutput("/usr/bin/ffprobe", ["-v", "error"] + reader + ["-show_entries", "stream=codec_type:stream_tags=language",
                                                                                     "-of", "csv=p=0", url])
        let streams = Set(probe.stdout.split(separator: "\n").map(String.init))
        #expect(probe.status == 0 && streams.contains("video,") && said.keys.allSatisfy { streams.contains("subtitle,\($0)") },
                "\(probe.stdout) \(probe.stderr)")
        for (language, word) in said {
            let read = try programOutput("/usr/bin/ffmpeg", ["-nostdin", "-loglevel", "error"] + reader
                                         + ["-i", url, "-map", "0:s:m:language:\(language)", "-f", "srt", "-"])
            let words = Set(read.stdout.lowercased().split { !$0.isLetter }.map(String.init))
            #expect(read.status == 0 && words.contains(word) && said.filter { $0.key != language }.values.allSatisfy { !words.contains($0) },
                    "\(language): \(read.stdout) \(read.stderr)")
        }
    }

    static func finals(_ jsonl: String) -> [JSONObject] {
        WhisperServeTests.events(jsonl).filter { $0["type"] == .string("final") }
    }

    static func words(_ finals: [JSONObject]) -> [String] { WhisperServeTests.words(ofFinals: finals) }

    /// The Whisper workers `pid` runs now (its children's command lines, from every thread's list).
    static func workers(of pid: pid_t) -> Int {
        let tasks = (try? FileManager.default.contentsOfDirectory(atPath: "/proc/\(pid)/task")) ?? []
        let children = tasks.flatMap { task in
            ((try? String(contentsOfFile: "/proc/\(pid)/task/\(task)/children", encoding: .utf8)) ?? "").split(separator: " ")
        }
        return children.filter { child in
            let line = FileManager.default.contents(atPath: "/proc/\(child.trimmingCharacters(in: .whitespacesAndNewlines))/cmdline") ?? Data()
            return String(decoding: line, as: UTF8.self).contains("whisper_worker.py")
        }.count
    }

    @Test func languagesAutoLanesAndTranslation() throws {
        let server = try ServeProcess(engine: nil)
        defer { _ = try? server.terminate() }
        let wav = try Self.italianSpeech()
        func send(_ file: String, _ arguments: [String]) throws -> (status: Int32, stdout: String, stderr: String) {
            try StenoCommand.run(["send", file, "--fast", "--server", server.url, "--format", "jsonl"] + arguments)
        }

        // The models and their languages.
        let models = try HTTPTestClient.get(port: server.port, "/v1/models").bodyText
        #expect(models.contains(#""name":"whisper-tiny.en","language":"en-US","languages":["en"]"#), "\(models)")
        #expect(models.contains(#""name":"whisper-base","language":"mul","languages":["en","zh","de","es","ru""#), "\(models)")
        // Said before its worker starts: the environment's CTranslate2, and the folder it loads from.
        #expect(models.contains(/"name":"whisper-base"[^}]*"version":"ctranslate2 [0-9][^}]*"loadedFrom":\{"model":"[^"]*whisper-base"/),
                "\(models)")
        let listed = try StenoCommand.run(["models", "--server", server.url])
        #expect(listed.status == 0, "\(listed.stderr)")
        let lines = listed.stdout.split(separator: "\n").map(String.init)
        #expect(lines.first?.hasPrefix("whisper-tiny.en") == true && lines.first?.contains("default") == true, "\(lines)")
        #expect(lines.contains { $0.hasPrefix("whisper-base") && $0.contains(" languages: en zh de es ru") && $0.contains(" it ") },
                "\(lines)")

        // English without a language: tiny.en, no language on the finals; the multilingual model's
        // worker is not started for it (its languages above came from its folder).
        #expect(Self.workers(of: server.command.pid) == 1)
        let english = try send(TestAudio.beckett, [])
        #expect(english.status == 0, "\(english.stderr)")
        #expect(english.stdout.contains(#""model":"whisper-tiny.en""#))
        #expect(Self.words(Self.finals(english.stdout)).contains("again"))
        #expect(Self.workers(of: server.command.pid) == 1)

        // Italian, found.
        let auto = try send(wav, ["--language", "auto"])
        #expect(auto.status == 0, "\(auto.stderr)")
        #expect(auto.stdout.contains(#""model":"whisper-base""#))
        let autoFinals = Self.finals(auto.stdout)
        #expect(!autoFinals.isEmpty && autoFinals.allSatisfy { $0["language"] == .string("it") }, "\(auto.stdout)")
        #expect(Set(Self.words(autoFinals)).isSuperset(of: ["buongiorno", "roma", "tempo"]), "\(Self.words(autoFinals))")
        #expect(Self.workers(of: server.command.pid) == 2, "the first session that needs it starts its worker")

        // Translated into English, the language spoken still named.
        let translated = try send(wav, ["--translate", "en"])
        #expect(translated.status == 0, "\(translated.stderr)")
        let english2 = Self.finals(translated.stdout)
        #expect(english2.allSatisfy { $0["language"] == .string("it") }, "\(translated.stdout)")
        #expect(Set(Self.words(english2)).isSuperset(of: ["rome"]), "\(Self.words(english2))")
        #expect(!Set(Self.words(english2)).contains("roma"), "\(Self.words(english2))")

        // Published on a channel, translated: viewers and caption files choose the English or
        // the Italian said (each final carries its original).
        let channel = "translated-\(getpid())"
        let published = try send(wav, ["--language", "it", "--translate", "en", "--channel", channel])
        #expect(published.status == 0, "\(published.stderr)")
        #expect(Self.finals(published.stdout).allSatisfy { $0["original"] != nil }, "\(published.stdout)")
        let italianFile = try HTTPTestClient.get(port: server.port, "/v1/channels/\(channel)/captions.txt?language=it").bodyText
        let englishFile = try HTTPTestClient.get(port: server.port, "/v1/channels/\(channel)/captions.txt?language=en").bodyText
        #expect(italianFile.contains("Roma") && !italianFile.contains("Rome"), "\(italianFile)")
        #expect(englishFile.contains("Rome") && !englishFile.contains("Roma"), "\(englishFile)")
        let master = try HTTPTestClient.get(port: server.port, "/v1/channels/\(channel)/master.m3u8?video=v.m3u8").bodyText
        #expect(master.contains(#"LANGUAGE="en""#) && master.contains(#"LANGUAGE="it",DEFAULT=NO,AUTOSELECT=YES,URI="captions.m3u8?language=it""#),
                "\(master)")
        try Self.playerReads(master: "http://127.0.0.1:\(server.port)/v1/channels/\(channel)/master.m3u8",
                             ["en": "rome", "it": "roma"])
        let viewer = try StenoCommand(["listen", "--channel", channel, "--language", "it", "--server", server.url, "--format", "jsonl"])
        try viewer.wait(for: "the Italian backfill") { viewer.stdout.text.contains("Roma") }
        viewer.interrupt()
        #expect(try viewer.finish() == 0, "\(viewer.stderr.text)")
        let viewed = Self.finals(viewer.stdout.text)
        #expect(!viewed.isEmpty && viewed.allSatisfy { $0["language"] == .string("it") && $0["original"] == nil }, "\(viewer.stdout.text)")
        #expect(Set(Self.words(viewed)).isSuperset(of: ["buongiorno", "roma"]), "\(Self.words(viewed))")

        // Lanes: heard in its lane; in none of them, no final but a non-fatal low_confidence.
        let lane = try send(wav, ["--languages", "it,en"])
        #expect(lane.status == 0, "\(lane.stderr)")
        #expect(Set(Self.words(Self.finals(lane.stdout))).isSuperset(of: ["roma"]), "\(lane.stdout)")
        let refused = try send(wav, ["--languages", "ru,en"])
        #expect(refused.status == 0, "\(refused.stderr)")
        #expect(Self.finals(refused.stdout).isEmpty, "\(refused.stdout)")
        let errors = WhisperServeTests.events(refused.stdout).filter { $0["type"] == .string("error") }
        #expect(!errors.isEmpty && errors.allSatisfy { $0["code"] == .string("low_confidence") && $0["fatal"] == .bool(false) },
                "\(refused.stdout)")
        if case .object(let scores)? = errors.first?["scores"] {
            #expect(scores.keys == ["ru", "en"])
        } else {
            Issue.record("no scores: \(refused.stdout)")
        }
        // English in lanes of its own: heard (a LibriVox sentence: base loops on Beckett's
        // "fail better" in a short window).
        let englishLane = try send(WhisperServeTests.librivox + "0880.wav", ["--languages", "ru,en"])
        #expect(Self.words(Self.finals(englishLane.stdout)).contains("disposed"), "\(englishLane.stdout)")

        // Wrong values: a bad_message naming the field.
        let wrong = try StenoCommand.run(["send", wav, "--fast", "--server", server.url, "--translate", "fr"])
        #expect(wrong.status == 2 && wrong.stderr.contains("--translate"), "\(wrong.stderr)")
    }
}
