import Foundation
import StenoCore
import StenoServer
import StenoTestSupport
import Testing

/// `steno send` against real servers, over real sockets, with real speech.
@Suite struct SendTests {
    static var server: String { CLIServer.shared.url }

    @Test func aFileGivesTheFinalsTranscribeGivesInTextAndJSONL() throws {
        let text = try StenoCommand.run(["send", TestAudio.clip, "--server", Self.server, "--fast", "--encoding", "pcm"])
        #expect(text.status == 0, "\(text.stderr)")
        #expect(text.stdout == (try TestAudio.transcribed(TestAudio.clip)))
        #expect(text.stdout.split(separator: "\n").count >= 2)

        let jsonl = try StenoCommand.run(["send", TestAudio.clip, "--server", Self.server, "--fast", "--encoding", "pcm",
                                          "--format", "jsonl"])
        #expect(jsonl.status == 0, "\(jsonl.stderr)")
        let expected = TestAudio.finals(ofJSONLines: try TestAudio.transcribed(TestAudio.clip, format: "jsonl"))
        #expect(!expected.isEmpty)
        #expect(TestAudio.finals(ofJSONLines: jsonl.stdout) == expected)
        let lines = jsonl.stdout.split(separator: "\n")
        #expect(lines.first?.hasPrefix(#"{"type":"ready","seq":1,"#) == true)
        #expect(lines.last?.hasPrefix(#"{"type":"ended""#) == true)
    }

    /// `--phrases FILE` and `--boost` go into `start`: the finals are those of `steno transcribe`
    /// with the same options.
    @Test func phrasesFromAFileGiveTheFinalsTranscribeGives() throws {
        let path = FileManager.default.temporaryDirectory.appendingPathComponent("steno-send-phrases-\(getpid()).txt").path
        try "ever tried\never failed\n".write(toFile: path, atomically: true, encoding: .utf8)
        let sent = try StenoCommand.run(["send", TestAudio.clip, "--server", Self.server, "--fast", "--encoding", "pcm",
                                         "--phrases", path, "--boost", "4"])
        #expect(sent.status == 0, "\(sent.stderr)")
        let transcribed = try StenoCommand.run(["transcribe", TestAudio.clip, "--phrases", path, "--boost", "4", "--no-progress"])
        #expect(transcribed.status == 0, "\(transcribed.stderr)")
        #expect(sent.stdout == transcribed.stdout)
        #expect(sent.stdout.lowercased().contains("] ever tried"), "\(sent.stdout)")
        let bad = try StenoCommand.run(["send", TestAudio.clip, "--server", Self.server, "--phrases", "/nonexistent/phrases.txt"])
        #expect(bad.status == 2 && bad.stderr.contains("--phrases"), "\(bad.stderr)")
    }

    @Test func opusIsTheDefaultAndCaptionFormatsWork() throws {
        let vtt = try StenoCommand.run(["send", TestAudio.clip, "--server", Self.server, "--fast", "--format", "vtt"])
        #expect(vtt.status == 0, "\(vtt.stderr)")
        #expect(vtt.stdout.hasPrefix("WEBVTT\n\n00:00:0"))
        #expect(vtt.stdout.contains(" --> "))
        #expect(vtt.stderr.contains("started") && vtt.stderr.contains("ended"))
    }

    @Test func standardInputAsRawPCMOrWAV() throws {
        let expected = try TestAudio.transcribed(TestAudio.clip)
        // What `ffmpeg -i ANYTHING -f s16le -ar 16000 -ac 1 - | steno send - --raw-rate 16000` sends.
        let raw = try StenoCommand.run(["send", "-", "--raw-rate", "16000", "--server", Self.server, "--encoding", "pcm"],
                                       input: TestAudio.clipRaw)
        #expect(raw.status == 0, "\(raw.stderr)")
        #expect(raw.stdout == expected)
        let wav = try StenoCommand.run(["send", "-", "--server", Self.server, "--encoding", "pcm"],
                                       input: try Data(contentsOf: URL(fileURLWithPath: TestAudio.clip)))
        #expect(wav.status == 0, "\(wav.stderr)")
        #expect(wav.stdout == expected)
    }

    @Test func aDroppedConnectionIsResumedAndTheFinalsAreAnUninterruptedSessions() throws {
        // The file at real time, so that the cut comes while it is being sent.
        let proxy = try TCPProxy(targetPort: CLIServer.shared.port)
        defer { proxy.stop() }
        let send = try StenoCommand(["send", TestAudio.clip, "--server", "ws://127.0.0.1:\(proxy.port)", "--encoding", "pcm",
                                     "--retry-max", "0.5"])
        try send.waitForStdout(lines: 1)
        proxy.cut()
        #expect(try send.finish() == 0, "\(send.stderr.text)")
        #expect(send.stderr.text.contains("resumed session"), "\(send.stderr.text)")
        #expect(proxy.acceptedCount >= 2)
        #expect(send.stdout.text == (try TestAudio.transcribed(TestAudio.clip)))
    }

    @Test func withoutResumeAReconnectStartsANewSessionAfterTheLastFinal() throws {
        let server = try CLIServer { $0.limits.resumeSeconds = 0 }
        defer { server.stop() }
        let proxy = try TCPProxy(targetPort: server.port)
        defer { proxy.stop() }
        let send = try StenoCommand(["send", TestAudio.clip, "--server", "ws://127.0.0.1:\(proxy.port)", "--retry-max", "0.5"])
        try send.waitForStdout(lines: 1)
        proxy.cut()
        #expect(try send.finish() == 0, "\(send.stderr.text)")
        #expect(send.stderr.text.contains("new session"), "\(send.stderr.text)")
        // No final twice, none overlapping, all inside the audio, on one timeline.
        let ranges = TestAudio.ranges(ofText: send.stdout.text)
        #expect(ranges.count >= 2)
        for (a, b) in zip(ranges, ranges.dropFirst()) { #expect(a.1 <= b.0, "\(ranges)") }
        #expect((ranges.last?.1 ?? 0) <= 4.6)
    }

    @Test func aResumeTheServerCannotGrantStartsANewSession() throws {
        // The address now leads to another server, which does not know the session.
        let other = try CLIServer()
        defer { other.stop() }
        let proxy = try TCPProxy(targetPort: CLIServer.shared.port)
        defer { proxy.stop() }
        let send = try StenoCommand(["send", TestAudio.clip, "--server", "ws://127.0.0.1:\(proxy.port)", "--retry-max", "0.5"])
        try send.waitForStdout(lines: 1)
        proxy.retarget(other.port)
        proxy.cut()
        #expect(try send.finish() == 0, "\(send.stderr.text)")
        #expect(send.stderr.text.contains("could not be resumed"), "\(send.stderr.text)")
        #expect(send.stderr.text.contains("new session"))
        let ranges = TestAudio.ranges(ofText: send.stdout.text)
        for (a, b) in zip(ranges, ranges.dropFirst()) { #expect(a.1 <= b.0, "\(ranges)") }
        #expect(ranges.count >= 2)
    }

    @Test func aSecondInterruptQuitsAtOnce() throws {
        let proxy = try TCPProxy(targetPort: CLIServer.shared.port)
        defer { proxy.stop() }
        let send = try StenoCommand(["send", TestAudio.clip, "--server", "ws://127.0.0.1:\(proxy.port)", "--retry-max", "0.2"])
        try send.waitForStderr("started")
        // The server out of reach: the first interrupt can only wait for it.
        proxy.refuse(true)
        proxy.cut()
        try send.waitForStderr("trying again")
        send.interrupt()
        try send.waitForStderr("interrupted")
        send.interrupt()
        #expect(try send.finish() == 130, "\(send.stderr.text)")
    }

    @Test func anInterruptEndsTheSessionWithItsLastFinals() throws {
        let send = try StenoCommand(["send", TestAudio.beckett, "--server", Self.server, "--format", "jsonl"])
        try send.wait(for: "a final") { send.stdout.text.contains(#""type":"final""#) }
        send.interrupt()
        #expect(try send.finish() == 0, "\(send.stderr.text)")
        #expect(send.stderr.text.contains("interrupted"))
        let last = send.stdout.lines.last ?? ""
        #expect(last.hasPrefix(#"{"type":"ended""#), "\(last)")
        // It ended early: less than the whole file was sent.
        guard case .object(let ended)? = try? JSONParser().parse(last), case .number(let duration)? = ended["duration"] else {
            Issue.record("no duration in \(last)")
            return
        }
        #expect(duration < 9.9)
    }

    @Test func aRefusedTokenAndAnUnreachableServerHaveTheirExitCodes() throws {
        let guarded = try CLIServer { $0.tokens = ["s3cret"] }
        defer { guarded.stop() }
        let wrong = try StenoCommand.run(["send", TestAudio.clip, "--server", guarded.url, "--token", "wrong"])
        #expect(wrong.status == 3 && wrong.stderr.contains("401"), "\(wrong.stderr)")
        let listen = try StenoCommand.run(["listen", "--channel", "x", "--server", guarded.url])
        #expect(listen.status == 3, "\(listen.stderr)")
        let right = try StenoCommand.run(["send", TestAudio.clip, "--server", guarded.url, "--fast"],
                                         environment: ["STENO_TOKEN": "s3cret"])
        #expect(right.status == 0, "\(right.stderr)")

        // A port nobody listens on (the guarded server's, once it has stopped).
        guarded.stop()
        let gone = try StenoCommand.run(["send", TestAudio.clip, "--server", guarded.url, "--retry-for", "1", "--retry-max", "0.2"])
        #expect(gone.status == 4, "\(gone.stderr)")
        #expect(gone.stderr.contains("giving up"))
    }

    @Test func aFullServerIsWaitedOut() throws {
        let server = try CLIServer { $0.maxSessions = 1 }
        defer { server.stop() }
        // Someone else holds the only session.
        let holder = try WebSocketTestClient.connect(port: server.port)
        try holder.sendText(#"{"type":"start","audio":{"encoding":"pcm_s16le","sampleRate":16000,"channels":1}}"#)
        _ = try holder.receive(timeout: 30)  // ready
        let send = try StenoCommand(["send", TestAudio.clip, "--server", server.url, "--fast", "--retry-max", "0.5"])
        try send.waitForStderr("busy (503)")
        // Cancelled, so that the server does not keep it for a resume.
        try holder.sendText(#"{"type":"cancel"}"#)
        _ = try holder.receiveUntilClose(timeout: 30)
        #expect(try send.finish() == 0, "\(send.stderr.text)")
        #expect(send.stdout.lines.count >= 2)
    }

    @Test func wssWithTheServersOwnCertificate() throws {
        let certificate = try TestCertificate()
        defer { certificate.remove() }
        let server = try CLIServer {
            $0.tls = ServerOptions.TLS(certificatePath: certificate.certificatePath, privateKeyPath: certificate.keyPath)
        }
        defer { server.stop() }
        let url = "wss://127.0.0.1:\(server.port)"
        let trusted = try StenoCommand.run(["send", TestAudio.clip, "--server", url, "--ca", certificate.certificatePath, "--fast"])
        #expect(trusted.status == 0, "\(trusted.stderr)")
        #expect(trusted.stdout.split(separator: "\n").count >= 2)
        // Not trusted: the certificate does not verify, which no retry mends.
        let untrusted = try StenoCommand.run(["send", TestAudio.clip, "--server", url, "--retry-for", "0.5", "--retry-max", "0.2"])
        #expect(untrusted.status == 4, "\(untrusted.stderr)")
    }

    @Test func badCommandLinesAndBadInput() throws {
        for arguments in [["send"], ["send", "a.wav", "b.wav"], ["send", "-", "--raw-format", "s16le"], ["listen"],
                          ["send", "x.wav", "--server", "localhost:8080"]] {
            let result = try StenoCommand.run(arguments)
            #expect(result.status == 2, "\(arguments): \(result.stderr)")
            #expect(!result.stderr.isEmpty)
        }
        let missing = try StenoCommand.run(["send", "/nonexistent/talk.wav"])
        #expect(missing.status == 1 && missing.stderr.contains("cannot open"), "\(missing.stderr)")
        let notWAV = try StenoCommand.run(["send", "-"], input: Data("this is not audio at all".utf8))
        #expect(notWAV.status == 1 && notWAV.stderr.contains("not a WAV file"), "\(notWAV.stderr)")
        let help = try StenoCommand.run(["send", "--help"])
        #expect(help.status == 0 && help.stdout.contains("--raw-rate") && help.stdout.contains("Exit codes"))
    }
}
