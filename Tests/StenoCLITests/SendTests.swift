import Foundation
import StenoAudio
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
        let transcribed = try StenoCommand.run(["transcribe", "--engine", "pocketsphinx", TestAudio.clip, "--phrases", path, "--boost", "4", "--no-progress"])
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

    /// SubRip, cue by cue: the cues `steno transcribe --format srt` makes of the same audio.
    @Test func srtGivesTheCuesTranscribeGives() throws {
        let srt = try StenoCommand.run(["send", TestAudio.clip, "--server", Self.server, "--fast", "--encoding", "pcm",
                                        "--format", "srt"])
        #expect(srt.status == 0, "\(srt.stderr)")
        let expected = try TestAudio.transcribed(TestAudio.clip, format: "srt")
        #expect(expected.hasPrefix("1\n00:00:0") && expected.contains("\n2\n"), "\(expected)")
        #expect(srt.stdout == expected)
    }

    /// Raw float stereo at 48 kHz on standard input (`--raw-rate 48000 --raw-channels 2
    /// --raw-format f32le`, what `ffmpeg -f f32le -ar 48000 -ac 2 -` writes): the finals of
    /// the same samples as a WAV file through `steno transcribe`.
    @Test func standardInputAsRawFloatStereoAt48kHz() throws {
        let clip = try WAVFile(path: TestAudio.clip)
        // Each 16 kHz sample three times, on both channels: values a 16-bit WAV holds exactly,
        // so the float stream and the reference file are the same audio.
        var samples: [Float] = []
        samples.reserveCapacity(clip.samples.count * 6)
        for sample in clip.samples { for _ in 0..<6 { samples.append(sample) } }
        let stereo = WAVFile(sampleRate: 48_000, channels: 2, samples: samples)
        let path = FileManager.default.temporaryDirectory.appendingPathComponent("steno-stereo48-\(getpid()).wav").path
        try stereo.write(path: path)
        defer { try? FileManager.default.removeItem(atPath: path) }
        let expected = try TestAudio.transcribed(path)
        #expect(TestAudio.ranges(ofText: expected).count >= 2, "\(expected)")
        let raw = Data(stereo.f32leBytes)
        let pcm = try StenoCommand.run(["send", "-", "--raw-rate", "48000", "--raw-channels", "2", "--raw-format", "f32le",
                                        "--server", Self.server, "--encoding", "pcm"], input: raw)
        #expect(pcm.status == 0, "\(pcm.stderr)")
        #expect(pcm.stdout == expected)
        // Opus (the default) takes it too: mixed down to mono, 48 kHz being a rate of Opus's.
        let opus = try StenoCommand.run(["send", "-", "--raw-rate", "48000", "--raw-channels", "2", "--raw-format", "f32le",
                                         "--server", Self.server], input: raw)
        #expect(opus.status == 0, "\(opus.stderr)")
        #expect(TestAudio.ranges(ofText: opus.stdout).count >= 2, "\(opus.stdout)")
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

    /// On a terminal, the volatile result is drawn on stderr and rewritten in place (`\r`,
    /// erase the line, the text dimmed), moved out of the way of each final and log line; off a
    /// terminal none of that is written. Run under a pseudo-terminal (python3's `pty`), at real
    /// time so that volatile results come, with stdout on the terminal too, as at a prompt.
    @Test func onATerminalTheVolatileLineIsRewrittenInPlace() throws {
        let script = """
            import os, pty, subprocess, sys
            primary, secondary = pty.openpty()
            child = subprocess.Popen(sys.argv[1:], stdin=subprocess.DEVNULL, stdout=secondary, stderr=secondary)
            os.close(secondary)
            while True:
                try:
                    chunk = os.read(primary, 65536)
                except OSError:
                    break  # EIO: the child has closed the terminal
                if not chunk:
                    break
                sys.stdout.buffer.write(chunk)
                sys.stdout.flush()
            sys.exit(child.wait())
            """
        let terminal = try StenoCommand(["-c", script, StenoCommand.binary, "send", TestAudio.clip, "--server", Self.server,
                                         "--encoding", "pcm"], executable: "/usr/bin/python3")
        #expect(try terminal.finish() == 0, "\(terminal.stderr.text)")
        let screen = terminal.stdout.text
        let erase = "\r\u{1B}[K"
        // Volatile guesses, each drawn over the last: several of them, dimmed.
        let drawn = screen.components(separatedBy: erase + "\u{1B}[2m").dropFirst()
            .map { $0.components(separatedBy: "\u{1B}[0m").first ?? "" }
        #expect(Set(drawn).count >= 2, "\(screen.debugDescription)")
        // Every final is printed whole on a line of its own (the terminal turns \n into \r\n),
        // the volatile line erased before it.
        let finals = try TestAudio.transcribed(TestAudio.clip).split(separator: "\n").map(String.init)
        #expect(finals.count >= 2)
        for final in finals {
            #expect(screen.contains(erase + final + "\r\n") || screen.contains("\n" + final + "\r\n"),
                    "\(final) in \(screen.debugDescription)")
        }
        // The log lines too, and the volatile line is gone at the end.
        #expect(screen.contains("started") && screen.contains("ended"))
        #expect(screen.hasSuffix("\r\n"), "\(screen.suffix(200).debugDescription)")

        // Off a terminal (pipes): the same finals, and no escape sequence anywhere.
        let piped = try StenoCommand.run(["send", TestAudio.clip, "--server", Self.server, "--encoding", "pcm"])
        #expect(piped.status == 0, "\(piped.stderr)")
        #expect(piped.stdout.split(separator: "\n").map(String.init) == finals)
        #expect(!piped.stderr.contains("\u{1B}") && !piped.stderr.contains("\r"), "\(piped.stderr.debugDescription)")
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

    /// The other refusals at the handshake exit 3 too (docs/operations.md, "Exit codes"): a
    /// 404 from Steno for a path it does not serve (a wrong prefix in `--server`), and a 403
    /// from whatever answers in front of it.
    @Test func notFoundAndForbiddenAtTheHandshakeExit3() throws {
        let wrongPrefix = Self.server + "/no-such-prefix"
        let send = try StenoCommand.run(["send", TestAudio.clip, "--server", wrongPrefix, "--fast"])
        #expect(send.status == 3 && send.stderr.contains("HTTP 404"), "\(send.stderr)")
        let listen = try StenoCommand.run(["listen", "--channel", "x", "--server", wrongPrefix])
        #expect(listen.status == 3 && listen.stderr.contains("HTTP 404"), "\(listen.stderr)")

        let forbidding = try CannedHTTPServer(response: "HTTP/1.1 403 Forbidden\r\nContent-Length: 0\r\nConnection: close\r\n\r\n")
        defer { forbidding.stop() }
        let url = "ws://127.0.0.1:\(forbidding.port)"
        let forbiddenSend = try StenoCommand.run(["send", TestAudio.clip, "--server", url])
        #expect(forbiddenSend.status == 3 && forbiddenSend.stderr.contains("403 Forbidden"), "\(forbiddenSend.stderr)")
        let forbiddenListen = try StenoCommand.run(["listen", "--channel", "x", "--server", url])
        #expect(forbiddenListen.status == 3 && forbiddenListen.stderr.contains("403 Forbidden"), "\(forbiddenListen.stderr)")
        // Refused once each: no retry.
        #expect(forbidding.servedCount == 2)
    }

    /// Audio held through an outage is sent on reconnect, and the backlog reported: on the
    /// resumed line or while it drains ("catching up: N s of audio to send"), and once it has
    /// ("caught up"). Sent into the socket's buffers at once, a backlog may drain before any
    /// periodic report sees it; the resumed line's still counts, and "caught up" follows.
    @Test func theBacklogAfterAnOutageIsReportedUntilCaughtUp() throws {
        let proxy = try TCPProxy(targetPort: CLIServer.shared.port)
        defer { proxy.stop() }
        // At real time, all of it sent (no pause left out), so that the backlog is audio.
        let send = try StenoCommand(["send", TestAudio.beckett, "--server", "ws://127.0.0.1:\(proxy.port)", "--encoding", "pcm",
                                     "--no-silence-suppression", "--retry-max", "0.3"])
        try send.waitForStderr("started")
        proxy.refuse(true)
        proxy.cut()
        // Out of reach until several seconds of audio wait: more than a socket's worth
        // (64 kB, 2 s of 16-bit PCM) is still unsent after the first sending round.
        try send.wait(for: "6 s of audio held") { Self.heldSeconds(send.stderr.text) >= 6 }
        proxy.refuse(false)
        #expect(try send.finish() == 0, "\(send.stderr.text)")
        let log = send.stderr.text
        guard let catching = log.range(of: " s of audio to send"), let caught = log.range(of: "caught up\n") else {
            Issue.record("no lag report: \(log)")
            return
        }
        #expect(catching.lowerBound < caught.lowerBound, "\(log)")
        #expect(log.contains("resumed session"), "\(log)")
        #expect(send.stdout.text == (try TestAudio.transcribed(TestAudio.beckett)))
    }

    /// The most audio a "trying again … (holding N s of audio)" line of `log` has reported.
    static func heldSeconds(_ log: String) -> Double {
        log.matches(of: /holding (\d+(?:\.\d+)?) s of audio/).compactMap { Double($0.1) }.max() ?? 0
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
