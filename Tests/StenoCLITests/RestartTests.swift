import Foundation
import StenoCore
import StenoTestSupport
import Testing

/// `steno send` and `steno listen` across a restart of the server: `steno serve` is stopped
/// with SIGTERM in the middle of a stream (it drains: finals, then 1001 `shutting_down`) and a
/// new one started on the same port, as a supervisor restarting it would.
@Suite struct RestartTests {
    /// The text of `[start → end] text` lines.
    static func texts(_ lines: [String]) -> [String] {
        lines.map { line in
            guard let close = line.firstIndex(of: "]") else { return line }
            return String(line[line.index(after: close)...].dropFirst())
        }
    }

    /// The sender reconnects, and since the drained session is over (its close frame says so),
    /// starts a new one with the audio after the last final it printed, its times put on the
    /// sender's own timeline: one transcript, no final twice, none overlapping.
    @Test func sendStartsANewSessionOnTheRestartedServer() throws {
        let first = try ServeProcess()
        let send = try StenoCommand(["send", TestAudio.beckett, "--server", first.url, "--encoding", "pcm",
                                     "--retry-max", "0.5"])
        try send.waitForStdout(lines: 1)
        #expect(try first.terminate() == 0, "\(first.command.stderr.text)")
        let second = try ServeProcess.restart(on: first.port)
        defer { _ = try? second.terminate() }
        #expect(try send.finish() == 0, "\(send.stderr.text)")
        let log = send.stderr.text
        #expect(log.contains("1001"), "\(log)")
        #expect(log.contains("reconnected: new session"), "\(log)")
        let ranges = TestAudio.ranges(ofText: send.stdout.text)
        #expect(ranges.count >= 3, "\(send.stdout.text)")
        for (a, b) in zip(ranges, ranges.dropFirst()) { #expect(a.1 <= b.0, "\(ranges)") }
        #expect((ranges.last?.1 ?? 0) <= 10, "\(ranges)")
    }

    /// A server that died without a drain (SIGKILL: no close frame) leaves the sender
    /// believing its session waits to be resumed; the new process does not know it
    /// (`resume_failed`, 4404), so the sender starts a new session after its last final.
    @Test func sendStartsANewSessionWhenTheRestartedServerCannotResume() throws {
        let first = try ServeProcess()
        let send = try StenoCommand(["send", TestAudio.beckett, "--server", first.url, "--encoding", "pcm",
                                     "--retry-max", "0.5"])
        try send.waitForStdout(lines: 1)
        kill(first.command.pid, SIGKILL)
        #expect(try first.command.finish() == 128 + SIGKILL)
        let second = try ServeProcess.restart(on: first.port)
        defer { _ = try? second.terminate() }
        #expect(try send.finish() == 0, "\(send.stderr.text)")
        let log = send.stderr.text
        #expect(log.contains("could not be resumed") && log.contains("reconnected: new session"), "\(log)")
        let ranges = TestAudio.ranges(ofText: send.stdout.text)
        #expect(ranges.count >= 2, "\(send.stdout.text)")
        for (a, b) in zip(ranges, ranges.dropFirst()) { #expect(a.1 <= b.0, "\(ranges)") }
        #expect((ranges.last?.1 ?? 0) <= 10, "\(ranges)")
    }

    /// The viewer is closed with 1001 after the publisher's finals, reconnects, and follows the
    /// channel on the new server: the publisher's new session is a new timeline, whose finals
    /// it prints; every final the publisher printed reaches it once.
    @Test func listenFollowsTheChannelOnTheRestartedServer() throws {
        let first = try ServeProcess()
        let channel = "restart-\(getpid())"
        let publisher = try StenoCommand(["send", TestAudio.beckett, "--server", first.url, "--channel", channel,
                                          "--encoding", "pcm", "--retry-max", "0.5"])
        try publisher.waitForStdout(lines: 1)
        let listener = try StenoCommand(["listen", "--channel", channel, "--server", first.url, "--retry-max", "0.5"])
        try listener.waitForStdout(lines: 1)
        #expect(try first.terminate() == 0, "\(first.command.stderr.text)")
        let second = try ServeProcess.restart(on: first.port)
        defer { _ = try? second.terminate() }
        #expect(try publisher.finish() == 0, "\(publisher.stderr.text)")
        #expect(publisher.stderr.text.contains("reconnected: new session"), "\(publisher.stderr.text)")
        let published = publisher.stdout.lines
        // Both broadcasts seen to their end: the drained one, then the new session's.
        try listener.wait(for: "both broadcasts' ends") {
            listener.stderr.text.components(separatedBy: "the broadcast is ended").count - 1 >= 2
                && listener.stdout.lines.count >= published.count
        }
        listener.interrupt()
        #expect(try listener.finish() == 0, "\(listener.stderr.text)")
        #expect(listener.stderr.text.contains("a new timeline"), "\(listener.stderr.text)")
        #expect(Self.texts(listener.stdout.lines) == Self.texts(published), "\(listener.stdout.text) vs \(published)")
    }
}
