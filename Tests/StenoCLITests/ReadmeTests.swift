import Foundation
import Testing

/// The README's `steno send` and `steno listen` examples, run as they are written there, one
/// after the other (the later ones follow the channel the earlier ones publish on), on a
/// server of their own.
@Suite(.serialized) struct ReadmeTests {
    static let readme: String = {
        var root = #filePath
        for _ in 0..<3 { root = String(root[..<(root.lastIndex(of: "/") ?? root.startIndex)]) }
        return root + "/README.md"
    }()

    static let server: CLIServer = {
        do {
            return try CLIServer()
        } catch {
            fatalError("cannot start the README's test server: \(error)")
        }
    }()

    /// The shell block after the comment that names this file and begins with `marker`.
    static func block(after marker: String) throws -> String {
        let text = try String(contentsOfFile: readme, encoding: .utf8)
        guard let found = text.range(of: "Tests/StenoCLITests/ReadmeTests.swift " + marker),
              let open = text.range(of: "```sh\n", range: found.upperBound..<text.endIndex),
              let close = text.range(of: "\n```", range: open.upperBound..<text.endIndex) else {
            throw CocoaError(.fileReadCorruptFile)
        }
        return String(text[open.upperBound..<close.lowerBound])
    }

    /// The block's commands: its lines without comments, `\` continuations joined.
    static func commands(of block: String) -> [String] {
        block.replacingOccurrences(of: "\\\n", with: " ").split(separator: "\n").map(String.init)
            .filter { !$0.trimmingCharacters(in: .whitespaces).hasPrefix("#") && !$0.trimmingCharacters(in: .whitespaces).isEmpty }
    }

    /// A folder holding talk.wav, and the environment the examples run in: the built `steno`
    /// first on PATH, STENO_SERVER the test server, HOME the folder (for an ALSA ~/.asoundrc).
    static func folder() throws -> (URL, [String: String]) {
        let folder = FileManager.default.temporaryDirectory.appendingPathComponent("steno-readme-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        try FileManager.default.copyItem(atPath: TestAudio.clip, toPath: folder.appendingPathComponent("talk.wav").path)
        let binaries = URL(fileURLWithPath: StenoCommand.binary).deletingLastPathComponent().path
        let path = binaries + ":" + (ProcessInfo.processInfo.environment["PATH"] ?? "/usr/bin:/bin")
        return (folder, ["PATH": path, "STENO_SERVER": server.url, "HOME": folder.path])
    }

    static func shell(_ script: String, in folder: URL, _ environment: [String: String]) throws -> StenoCommand {
        try StenoCommand(["-c", "set -e\ncd '\(folder.path)'\n" + script + "\n"], environment: environment, executable: "/bin/sh")
    }

    @Test func theSendExamplesRunAsWritten() throws {
        let block = try Self.block(after: "runs the block below as it is written here")
        #expect(block.contains("steno send"))
        let (folder, environment) = try Self.folder()
        defer { try? FileManager.default.removeItem(at: folder) }
        let shell = try Self.shell(block, in: folder, environment)
        #expect(try shell.finish() == 0, "\(shell.stderr.text)")
        let srt = try String(contentsOf: folder.appendingPathComponent("talk.srt"), encoding: .utf8)
        #expect(srt.hasPrefix("1\n00:00:0"), "\(srt)")
        // The two standard-input examples printed the clip's finals, text as transcribe prints them.
        #expect(TestAudio.ranges(ofText: shell.stdout.text).count >= 4)
        #expect(shell.stdout.text.contains("] "))
    }

    /// ffmpeg into `steno send -`, a microphone (ALSA's `default`, here a device playing the
    /// clip), then `steno listen` into a log and into jq, following what the microphone said.
    @Test func theFFmpegMicrophoneAndListenExamplesRunAsWritten() throws {
        let sources = Self.commands(of: try Self.block(after: "runs the block below too"))
        let listens = Self.commands(of: try Self.block(after: "runs these too"))
        #expect(sources.count == 2 && sources[0].hasPrefix("ffmpeg ") && sources[1].hasPrefix("steno send --device"), "\(sources)")
        #expect(listens.count == 2 && listens.allSatisfy { $0.hasPrefix("steno listen") }, "\(listens)")
        let (folder, environment) = try Self.folder()
        defer { try? FileManager.default.removeItem(at: folder) }
        for tool in ["ffmpeg", "jq"] {
            let found = (environment["PATH"] ?? "").split(separator: ":")
                .contains { FileManager.default.isExecutableFile(atPath: "\($0)/\(tool)") }
            try #require(found, "\(tool) is not installed (scripts/bootstrap.sh test installs it)")
        }

        // talk.mp4: the clip as AAC in MP4, what a recording would be.
        let mp4 = try Self.shell("ffmpeg -loglevel error -i talk.wav -c:a aac talk.mp4", in: folder, environment)
        #expect(try mp4.finish() == 0, "\(mp4.stderr.text)")
        let ffmpeg = try Self.shell(sources[0], in: folder, environment)
        #expect(try ffmpeg.finish() == 0, "\(ffmpeg.stderr.text)")
        #expect(TestAudio.ranges(ofText: ffmpeg.stdout.text).count >= 2, "\(ffmpeg.stdout.text) \(ffmpeg.stderr.text)")

        // The microphone: ALSA's default device plays the clip (then silence) from ~/.asoundrc.
        let raw = folder.appendingPathComponent("talk.raw")
        try TestAudio.clipRaw.write(to: raw)
        try """
            pcm.!default {
                type file
                slave.pcm null
                file "/dev/null"
                infile "\(raw.path)"
                format "raw"
            }
            """.write(to: folder.appendingPathComponent(".asoundrc"), atomically: true, encoding: .utf8)
        let microphone = try Self.shell("exec " + sources[1], in: folder, environment)
        try microphone.waitForStdout(lines: 2)
        microphone.interrupt()
        #expect(try microphone.finish() == 0, "\(microphone.stderr.text)")
        let said = microphone.stdout.lines
        #expect(said.count >= 2)

        // Into a log: the channel's finals so far, those of the microphone.
        let log = folder.appendingPathComponent("studio-a.log")
        let logging = try Self.shell("exec " + listens[0], in: folder, environment)
        try logging.wait(for: "the channel's finals in studio-a.log") {
            ((try? String(contentsOf: log, encoding: .utf8)) ?? "").split(separator: "\n").count >= said.count
        }
        logging.interrupt()
        #expect(try logging.finish() == 0, "\(logging.stderr.text)")
        #expect(try String(contentsOf: log, encoding: .utf8).split(separator: "\n").map(String.init) == said)

        // Into jq: their texts. Only listen is interrupted; jq ends with its input.
        let piped = try Self.shell(listens[1], in: folder, environment)
        try piped.wait(for: "the finals' texts from jq") { piped.stdout.lines.count >= said.count }
        let listener = try Self.child(of: piped.pid, named: "steno")
        kill(listener, SIGINT)
        #expect(try piped.finish() == 0, "\(piped.stderr.text)")
        #expect(piped.stdout.lines == said.map { String($0[$0.index(after: $0.firstIndex(of: "]")!)...].dropFirst()) })
    }

    /// The pid of a child process of `parent` whose command is `name` (from /proc).
    static func child(of parent: pid_t, named name: String) throws -> pid_t {
        for entry in try FileManager.default.contentsOfDirectory(atPath: "/proc") {
            guard let pid = pid_t(entry),
                  let stat = try? String(contentsOfFile: "/proc/\(entry)/stat", encoding: .utf8),
                  let open = stat.firstIndex(of: "("), let close = stat.lastIndex(of: ")") else { continue }
            let comm = stat[stat.index(after: open)..<close]
            let fields = stat[stat.index(after: close)...].split(separator: " ")
            if comm == name, fields.count > 1, pid_t(fields[1]) == parent { return pid }
        }
        throw CocoaError(.fileNoSuchFile)
    }
}
