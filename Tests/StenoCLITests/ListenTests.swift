import Foundation
import StenoCore
import StenoTestSupport
import Testing

/// `steno listen`, and `steno send --device` from an ALSA device.
@Suite struct ListenTests {
    @Test func backfillThenLiveFinalsAndNoFinalTwiceAcrossAReconnect() throws {
        let server = CLIServer.shared
        let channel = "listen-\(getpid())"
        // The publisher, at real time.
        let publisher = try StenoCommand(["send", TestAudio.beckett, "--server", server.url, "--channel", channel])
        try publisher.waitForStdout(lines: 1)
        // A viewer joining late gets what was said so far, then the rest as it is said; its
        // connection is cut on the way.
        let proxy = try TCPProxy(targetPort: server.port)
        defer { proxy.stop() }
        let listener = try StenoCommand(["listen", "--channel", channel, "--server", "ws://127.0.0.1:\(proxy.port)",
                                         "--retry-max", "0.5"])
        try listener.waitForStdout(lines: 2)
        proxy.cut()
        #expect(try publisher.finish() == 0, "\(publisher.stderr.text)")
        let published = publisher.stdout.lines
        #expect(published.count >= 4)
        try listener.wait(for: "every final") { listener.stdout.lines.count >= published.count }
        try listener.waitForStderr("again")  // it reconnected
        listener.interrupt()
        #expect(try listener.finish() == 0, "\(listener.stderr.text)")
        #expect(listener.stdout.lines == published)
        #expect(proxy.acceptedCount >= 2)
    }

    @Test func jsonlIsTheChannelsEventsWithoutRepeats() throws {
        let server = CLIServer.shared
        let channel = "listen-jsonl-\(getpid())"
        let publisher = try StenoCommand.run(["send", TestAudio.clip, "--server", server.url, "--channel", channel, "--fast",
                                              "--encoding", "pcm"])
        #expect(publisher.status == 0, "\(publisher.stderr)")
        // After the publisher left: the channel's finals are all backfill.
        let listener = try StenoCommand(["listen", "--channel", channel, "--server", server.url, "--format", "jsonl"])
        let finals = publisher.stdout.split(separator: "\n").count
        try listener.wait(for: "the backfill") {
            listener.stdout.lines.filter { $0.contains(#""type":"final""#) }.count >= finals
        }
        listener.interrupt()
        #expect(try listener.finish() == 0)
        #expect(listener.stdout.lines.first?.hasPrefix(#"{"type":"joined""#) == true)
        #expect(TestAudio.finals(ofJSONLines: listener.stdout.text) == TestAudio.finals(ofJSONLines: try TestAudio.transcribed(TestAudio.clip, format: "jsonl")))
    }

    /// WebVTT and SubRip, cue by cue: a viewer that followed the whole broadcast writes the
    /// cues `steno transcribe` makes of the audio (the last one when the broadcast ends).
    @Test func vttAndSRTAreTheCuesTranscribeMakes() throws {
        let server = CLIServer.shared
        let channel = "listen-cues-\(getpid())"
        // At real time, so that the viewers join while it is live and see it end.
        let publisher = try StenoCommand(["send", TestAudio.clip, "--server", server.url, "--channel", channel,
                                          "--encoding", "pcm"])
        try publisher.waitForStderr("started")
        var viewers: [(String, StenoCommand)] = []
        for format in ["vtt", "srt"] {
            viewers.append((format, try StenoCommand(["listen", "--channel", channel, "--server", server.url,
                                                      "--format", format])))
        }
        #expect(try publisher.finish() == 0, "\(publisher.stderr.text)")
        for (format, viewer) in viewers {
            let expected = try TestAudio.transcribed(TestAudio.clip, format: format)
            #expect(expected.contains(" --> "))
            try viewer.wait(for: "every \(format) cue") { viewer.stdout.text == expected }
            try viewer.waitForStderr("the broadcast is ended")
            viewer.interrupt()
            #expect(try viewer.finish() == 0, "\(viewer.stderr.text)")
            #expect(viewer.stdout.text == expected)
        }
    }

    /// The reader of listen's (or send's) output went away (`steno listen … | head -1`): the
    /// next caption it writes ends it with 141, as SIGPIPE would (docs/operations.md, "Exit codes").
    @Test func aClosedStandardOutputEndsListenAndSendWith141() throws {
        let server = CLIServer.shared
        let channel = "listen-head-\(getpid())"
        // Live, at real time: finals keep coming after the first one.
        let publisher = try StenoCommand(["send", TestAudio.beckett, "--server", server.url, "--channel", channel,
                                          "--encoding", "pcm"])
        defer {
            publisher.interrupt()
            _ = try? publisher.finish()
        }
        try publisher.waitForStdout(lines: 1)
        let script = #""$0" listen --channel "$1" --server "$2" | head -n 1; echo "listen exited ${PIPESTATUS[0]}" >&2"#
        let shell = try StenoCommand(["-c", script, StenoCommand.binary, channel, server.url], executable: "/bin/bash")
        #expect(try shell.finish() == 0, "\(shell.stderr.text)")
        #expect(shell.stdout.lines.count == 1 && shell.stdout.text.hasPrefix("[00:00:0"), "\(shell.stdout.text)")
        #expect(shell.stderr.text.contains("listen exited 141"), "\(shell.stderr.text)")

        // send's captions the same way (the file at real time: finals keep coming).
        let sendScript = #""$0" send "$1" --server "$2" | head -n 1; echo "send exited ${PIPESTATUS[0]}" >&2"#
        let sender = try StenoCommand(["-c", sendScript, StenoCommand.binary, TestAudio.beckett, server.url],
                                      executable: "/bin/bash")
        #expect(try sender.finish() == 0, "\(sender.stderr.text)")
        #expect(sender.stdout.lines.count == 1, "\(sender.stdout.text)")
        #expect(sender.stderr.text.contains("send exited 141"), "\(sender.stderr.text)")
    }

    /// ALSA's `file` plugin plays a raw file into a capture device (with the `null` device
    /// under it), which works in a container without a sound card: the device `stenotest` is
    /// declared in the `.asoundrc` of a HOME made for the test. Returns that HOME.
    static func alsaHome(playing audio: Data) throws -> URL {
        let home = FileManager.default.temporaryDirectory.appendingPathComponent("steno-alsa-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: home, withIntermediateDirectories: true)
        let raw = home.appendingPathComponent("audio.raw")
        try audio.write(to: raw)
        try """
            pcm.stenotest {
                type file
                slave.pcm null
                file "/dev/null"
                infile "\(raw.path)"
                format "raw"
            }
            """.write(to: home.appendingPathComponent(".asoundrc"), atomically: true, encoding: .utf8)
        return home
    }

    @Test func captureFromAnALSADevice() throws {
        let home = try Self.alsaHome(playing: TestAudio.clipRaw)
        defer { try? FileManager.default.removeItem(at: home) }
        let environment = ["HOME": home.path]

        let devices = try StenoCommand.run(["send", "--list-devices"], environment: environment)
        #expect(devices.status == 0 && devices.stdout.contains("stenotest"), "\(devices.stdout) \(devices.stderr)")

        let send = try StenoCommand(["send", "--device", "stenotest", "--rate", "16000", "--encoding", "pcm",
                                     "--server", CLIServer.shared.url], environment: environment)
        // The device gives the clip, then (the file played out) whatever the null device has.
        let expected = try TestAudio.transcribed(TestAudio.clip).split(separator: "\n").map(String.init)
        try send.waitForStdout(lines: 2)
        send.interrupt()
        #expect(try send.finish() == 0, "\(send.stderr.text)")
        #expect(Array(send.stdout.lines.prefix(2)) == Array(expected.prefix(2)))

        let missing = try StenoCommand.run(["send", "--device", "no-such-device", "--server", CLIServer.shared.url],
                                           environment: environment)
        #expect(missing.status == 1 && missing.stderr.contains("cannot open the capture device"), "\(missing.stderr)")
    }

    /// A microphone goes on while the server is out of reach; beyond `--buffer-seconds` its
    /// oldest audio is dropped, and the resumed session is told of the hole (`gap`).
    @Test func aLongOutageOfALiveSourceIsDeclaredAsAGap() throws {
        let home = try Self.alsaHome(playing: TestAudio.clipRaw)
        defer { try? FileManager.default.removeItem(at: home) }
        let proxy = try TCPProxy(targetPort: CLIServer.shared.port)
        defer { proxy.stop() }
        let send = try StenoCommand(["send", "--device", "stenotest", "--encoding", "pcm", "--format", "jsonl",
                                     "--buffer-seconds", "1", "--retry-max", "0.3", "--server", "ws://127.0.0.1:\(proxy.port)"],
                                    environment: ["HOME": home.path])
        try send.wait(for: "ready") { send.stdout.text.contains(#""type":"ready""#) }
        // Out of reach: connections are cut and refused until audio has been dropped.
        proxy.refuse(true)
        proxy.cut()
        try send.waitForStderr("dropped")
        proxy.refuse(false)
        try send.wait(for: "the server's gap event") { send.stdout.text.contains(#"{"type":"gap""#) }
        send.interrupt()
        #expect(try send.finish() == 0, "\(send.stderr.text)")
        #expect(send.stderr.text.contains("resumed session") && send.stderr.text.contains("declared a gap"))
        #expect(send.stdout.lines.last?.hasPrefix(#"{"type":"ended""#) == true)
    }
}
