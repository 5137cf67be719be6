import Foundation
import Testing

/// The README's `steno send` examples, run as they are written there.
@Suite struct ReadmeTests {
    static let readme: String = {
        var root = #filePath
        for _ in 0..<3 { root = String(root[..<(root.lastIndex(of: "/") ?? root.startIndex)]) }
        return root + "/README.md"
    }()

    /// The shell block after the comment that names this file.
    static func testedBlock() throws -> String {
        let text = try String(contentsOfFile: readme, encoding: .utf8)
        guard let marker = text.range(of: "Tests/StenoCLITests/ReadmeTests.swift runs the block below"),
              let open = text.range(of: "```sh\n", range: marker.upperBound..<text.endIndex),
              let close = text.range(of: "\n```", range: open.upperBound..<text.endIndex) else {
            throw CocoaError(.fileReadCorruptFile)
        }
        return String(text[open.upperBound..<close.lowerBound])
    }

    @Test func theSendExamplesRunAsWritten() throws {
        let block = try Self.testedBlock()
        #expect(block.contains("steno send"))
        let folder = FileManager.default.temporaryDirectory.appendingPathComponent("steno-readme-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: folder) }
        try FileManager.default.copyItem(atPath: TestAudio.clip, toPath: folder.appendingPathComponent("talk.wav").path)
        let binaries = URL(fileURLWithPath: StenoCommand.binary).deletingLastPathComponent().path
        let path = binaries + ":" + (ProcessInfo.processInfo.environment["PATH"] ?? "/usr/bin:/bin")
        let script = "set -e\ncd '\(folder.path)'\n" + block + "\n"
        let shell = try StenoCommand(["-c", script], environment: ["PATH": path, "STENO_SERVER": CLIServer.shared.url],
                                     executable: "/bin/sh")
        #expect(try shell.finish() == 0, "\(shell.stderr.text)")
        let srt = try String(contentsOf: folder.appendingPathComponent("talk.srt"), encoding: .utf8)
        #expect(srt.hasPrefix("1\n00:00:0"), "\(srt)")
        // The two standard-input examples printed the clip's finals, text as transcribe prints them.
        #expect(TestAudio.ranges(ofText: shell.stdout.text).count >= 4)
        #expect(shell.stdout.text.contains("] "))
    }
}
