import Foundation
import StenoCore
import StenoTestSupport
import Testing

/// Several `steno serve` processes behind HAProxy running docs/haproxy/steno.cfg (TLS at
/// HAProxy, `leastconn`, `/readyz` checks, `retry-on 503`), with `steno send` as the talker.
@Suite(.serialized, .enabled(if: HAProxy.isInstalled, "\(HAProxy.missing)"))
struct ClusterTests {
    static let instanceArguments = ["--trusted-proxy", HAProxy.sourceAddress]

    @Test func aFullInstanceHandsTheTalkerToAnotherAndTheProxysForwardedAddressIsLogged() throws {
        // Its one session must stay (no idle timeout) however slowly the talkers go.
        let full = try ServeInstance(Self.instanceArguments + ["--max-sessions", "1", "--idle-timeout", "0"])
        defer { full.stop() }
        let roomy = try ServeInstance(Self.instanceArguments)
        defer { roomy.stop() }
        // The full instance's only session, held by a client on the instance itself, which
        // claims another address: nobody but the trusted proxy is believed.
        let holder = try WebSocketTestClient.connect(port: full.port, headers: [("X-Forwarded-For", "203.0.113.9")], timeout: 30)
        defer { holder.disconnect() }
        try holder.sendText(#"{"type":"start","audio":{"encoding":"pcm_s16le","sampleRate":16000,"channels":1}}"#)
        _ = try holder.receive(timeout: 30)  // ready
        #expect(try HTTPTestClient.get(port: full.port, "/readyz").status == 503)
        #expect(try HTTPTestClient.get(port: roomy.port, "/readyz").status == 200)

        // No health checks on the talkers' backend: what keeps talkers off the full instance here
        // is retry-on alone (a check would have taken it out of the rotation at once).
        let proxy = try HAProxy(instances: [full.port, roomy.port], talkerChecks: false)
        defer { proxy.stop() }
        let expected = try TestAudio.transcribed(TestAudio.clip, endpointing: ServeInstance.endpointing)
        for attempt in 1...3 {
            let send = try StenoCommand.run(["send", TestAudio.clip, "--server", proxy.url, "--ca", proxy.caPath, "--fast", "--encoding", "pcm",
                                             "--retry-max", "0.5"])
            #expect(send.status == 0, "talker \(attempt): \(send.stderr)")
            #expect(send.stdout == expected, "talker \(attempt)")
            // HAProxy handed the handshake on: the talker never saw the full instance's 503
            // (`steno send` says "busy (503)"; a bare "503" can be part of a random session id).
            #expect(!send.stderr.contains("(503)"), "talker \(attempt): \(send.stderr)")
        }
        #expect(full.sessionsStarted == 1, "\(full.log)")
        #expect(roomy.sessionsStarted == 3, "\(roomy.log)")
        #expect(roomy.log.contains("from 127.0.0.1 via \(HAProxy.sourceAddress)"), "\(roomy.log)")
        #expect(full.log.contains("from 127.0.0.1\n") && !full.log.contains("203.0.113.9"), "\(full.log)")
        // leastconn saw both instances free each time and took the full one at least once:
        // HAProxy retried that handshake on the other instance (its log counts the retry).
        // HAProxy logs a WebSocket request when its connection closes, which can be after
        // `steno send` has exited: wait for the lines (the deadline only catches their absence).
        try? proxy.command.wait(for: "HAProxy's log of the three handshakes", timeout: 60) { proxy.talkerHandshakes.count >= 3 }
        let handshakes = proxy.talkerHandshakes
        #expect(handshakes.count == 3 && handshakes.allSatisfy { $0.server == "steno2" }, "\(proxy.log)")
        #expect(handshakes.contains { $0.retries > 0 }, "\(proxy.log)")
    }

    /// A talker whose connection drops (the instance is fine) resumes its session through
    /// HAProxy: the cookie of its first handshake takes the resume to the instance that runs
    /// the session, although that instance, full, is out of the rotation for new talkers.
    @Test func aDroppedTalkerResumesOnItsInstanceThroughHAProxy() throws {
        let arguments = Self.instanceArguments + ["--max-sessions", "1", "--idle-timeout", "0"]
        let first = try ServeInstance(arguments)
        defer { first.stop() }
        let second = try ServeInstance(arguments)
        defer { second.stop() }
        let proxy = try HAProxy(instances: [first.port, second.port])
        defer { proxy.stop() }

        // The whole file at real time, so that the cut comes while it is being sent.
        let send = try StenoCommand(["send", TestAudio.beckett, "--server", proxy.url, "--ca", proxy.caPath,
                                     "--encoding", "pcm", "--retry-max", "0.5"])
        try send.wait(for: "the session to start") { first.sessionsStarted + second.sessionsStarted == 1 }
        let (home, other) = first.sessionsStarted == 1 ? (first, second) : (second, first)
        let name = home === first ? "steno1" : "steno2"
        try send.wait(for: "HAProxy to take the full instance out of the rotation", timeout: 30) {
            proxy.log.contains { $0.contains("Server talkers/\(name) is DOWN") }
        }
        // HAProxy cuts the talker's connection; to the instance it is a connection that dropped.
        try proxy.runtime("shutdown sessions server talkers/\(name)")
        #expect(try send.finish() == 0, "\(send.stderr.text)")
        #expect(send.stderr.text.contains("resumed session"), "\(send.stderr.text)\n\(proxy.log)")
        #expect(!send.stderr.text.contains("new session") && !send.stderr.text.contains("could not be resumed"),
                "\(send.stderr.text)")
        #expect(home.sessionsStarted == 1 && other.sessionsStarted == 0, "\(home.log)\n\(other.log)")
        // The resumed connection is logged when it closes, perhaps after `steno send` exited.
        try? proxy.command.wait(for: "HAProxy's log of both handshakes", timeout: 60) { proxy.talkerHandshakes.count >= 2 }
        #expect(proxy.talkerHandshakes.count >= 2 && proxy.talkerHandshakes.allSatisfy { $0.server == name }, "\(proxy.log)")
        // Nothing heard twice or lost: the finals of an uninterrupted session.
        #expect(send.stdout.text == (try TestAudio.transcribed(TestAudio.beckett, endpointing: ServeInstance.endpointing)))
    }

    @Test func aRollingRestartLosesNoFinal() throws {
        let first = try ServeInstance(Self.instanceArguments + ["--drain-timeout", "10"])
        defer { first.stop() }
        let second = try ServeInstance(Self.instanceArguments)
        defer { second.stop() }
        let proxy = try HAProxy(instances: [first.port, second.port])
        defer { proxy.stop() }

        // The whole file at real time, so that the drain comes while it is being sent.
        let send = try StenoCommand(["send", TestAudio.beckett, "--server", proxy.url, "--ca", proxy.caPath,
                                     "--encoding", "pcm", "--retry-max", "0.5"])
        try send.waitForStdout(lines: 1)
        let (drained, other) = first.sessionsStarted == 1 ? (first, second) : (second, first)
        #expect(drained.sessionsStarted == 1 && other.sessionsStarted == 0, "\(first.log)\n\(second.log)")
        drained.terminate()
        #expect(try drained.finish() == 0, "\(drained.log)")
        #expect(try send.finish() == 0, "\(send.stderr.text)")
        // The drained instance finalized what it had; the sender went on through HAProxy with
        // a new session on the other instance, from the audio after the last final it printed.
        #expect(send.stderr.text.contains("new session"), "\(send.stderr.text)")
        #expect(other.sessionsStarted == 1, "\(other.log)")
        // HAProxy's health check took the drained instance out (/readyz said 503, then nothing).
        let drainedName = drained === first ? "steno1" : "steno2"
        #expect(proxy.log.contains { $0.contains("Server talkers/\(drainedName) is DOWN") }, "\(proxy.log)")
        let ranges = TestAudio.ranges(ofText: send.stdout.text)
        for (a, b) in zip(ranges, ranges.dropFirst()) { #expect(a.1 <= b.0, "\(send.stdout.text)") }
        // The utterance the drain cut is finalized there and heard again from its cut, so the
        // words around the cut may differ; but every stretch of speech has its final.
        let reference = try TestAudio.transcribed(TestAudio.beckett, endpointing: ServeInstance.endpointing)
        for (start, end) in TestAudio.ranges(ofText: reference) {
            #expect(ranges.contains { $0.0 < end && $0.1 > start }, "no final over [\(start), \(end)]: \(send.stdout.text)")
        }
        #expect(Self.overlap(Self.words(send.stdout.text), Self.words(reference)) >= 0.5, "\(send.stdout.text)\nvs\n\(reference)")

        // The drained instance comes back on its port; then the other one is drained: the next
        // talker gets the one that came back (once HAProxy's checks see it up again).
        let back = try drained.restarted()
        defer { back.stop() }
        other.terminate()
        #expect(try other.finish() == 0, "\(other.log)")
        let next = try StenoCommand.run(["send", TestAudio.clip, "--server", proxy.url, "--ca", proxy.caPath, "--fast", "--encoding", "pcm",
                                         "--retry-max", "0.5"])
        #expect(next.status == 0, "\(next.stderr)")
        #expect(next.stdout == (try TestAudio.transcribed(TestAudio.clip, endpointing: ServeInstance.endpointing)))
        #expect(back.sessionsStarted == 1, "\(back.log)")
    }

    /// Viewers on every instance, one instance killed and started again, Redis restarted:
    /// every viewer gets every final of a publisher on any instance.
    @Test(.enabled(if: TestRedisServer.isInstalled, "\(TestRedisServer.missing)"))
    func viewersOnEveryInstanceGetThePublishersFinalsThroughHAProxyAndRedis() throws {
        let redis = try TestRedisServer()
        defer { redis.remove() }
        let arguments = Self.instanceArguments + ["--redis", redis.url]
        let instances = try (0..<3).map { _ in try ServeInstance(arguments) }
        defer { for instance in instances { instance.stop() } }
        let proxy = try HAProxy(instances: instances.map(\.port))
        defer { proxy.stop() }

        // Three viewers through HAProxy, one after the other: leastconn gives each instance one.
        var viewers: [StenoCommand] = []
        defer { for viewer in viewers where viewer.isRunning { kill(viewer.pid, SIGKILL) } }
        func joins(_ instance: ServeInstance) -> Int { instance.log.components(separatedBy: "joined channel hall").count - 1 }
        func joined() -> Int { instances.reduce(0) { $0 + joins($1) } }
        for count in 1...3 {
            viewers.append(try StenoCommand(["listen", "--channel", "hall", "--server", proxy.url, "--ca", proxy.caPath,
                                             "--retry-max", "0.5"]))
            try viewers.last!.wait(for: "viewer \(count) to join") { joined() == count }
        }
        for instance in instances {
            #expect(joins(instance) == 1, "\(instance.log)")
        }

        // One instance is killed: its viewer comes back through HAProxy on another one; the
        // instance is started again on its port.
        instances[2].stop()
        try viewers[0].wait(for: "the third instance's viewer to join elsewhere", timeout: 60) {
            joins(instances[0]) + joins(instances[1]) == 3
        }
        let back = try instances[2].restarted()
        defer { back.stop() }
        // Redis is restarted (without its data): every instance links up again by itself.
        redis.stop()
        try redis.start()

        // The publisher, through HAProxy too, lands on one of them.
        let send = try StenoCommand.run(["send", TestAudio.clip, "--channel", "hall", "--server", proxy.url, "--ca", proxy.caPath,
                                         "--fast", "--encoding", "pcm", "--retry-max", "0.5"])
        #expect(send.status == 0, "\(send.stderr)")
        #expect(send.stdout == (try TestAudio.transcribed(TestAudio.clip, endpointing: ServeInstance.endpointing)))
        #expect((instances.prefix(2) + [back]).filter { $0.sessionsStarted == 1 }.count == 1)
        let finals = send.stdout.split(separator: "\n").count
        for (index, viewer) in viewers.enumerated() {
            try viewer.wait(for: "viewer \(index + 1)'s finals") { viewer.stdout.lines.count >= finals }
            #expect(viewer.stdout.text == send.stdout, "viewer \(index + 1)")
            viewer.interrupt()
            #expect(try viewer.finish() == 0, "\(viewer.stderr.text)")
        }
    }

    /// The instance a talker publishes from is killed (SIGKILL) in the middle of its speech: the
    /// talker goes on through HAProxy on the other instance in a new session that `continues`
    /// the lost one, whose relay takes the dead publisher's lease over at once (its resume
    /// token proves the talker) or, if it has expired meanwhile, takes it as any lease, and the
    /// viewer gets every final the talker printed, once each. With the default lease the dead
    /// one may have expired before the new session starts; a 20 s lease is surely taken over.
    @Test(.enabled(if: TestRedisServer.isInstalled, "\(TestRedisServer.missing)"), arguments: [nil, "20"])
    func aPublishersInstanceKilledMidSpeechCostsItsViewerNoFinal(lease: String?) throws {
        let redis = try TestRedisServer()
        defer { redis.remove() }
        let arguments = Self.instanceArguments + ["--redis", redis.url] + (lease.map { ["--channel-lease", $0] } ?? [])
        let instances = try (0..<2).map { _ in try ServeInstance(arguments) }
        defer { for instance in instances { instance.stop() } }
        let proxy = try HAProxy(instances: instances.map(\.port))
        defer { proxy.stop() }

        let viewer = try StenoCommand(["listen", "--channel", "hall", "--server", proxy.url, "--ca", proxy.caPath,
                                       "--retry-max", "0.5"])
        defer { if viewer.isRunning { kill(viewer.pid, SIGKILL) } }
        try viewer.wait(for: "the viewer to join") { instances.contains { $0.log.contains("joined channel hall") } }
        // At real time, so that the kill comes in the middle of the speech.
        let send = try StenoCommand(["send", TestAudio.beckett, "--channel", "hall", "--server", proxy.url, "--ca", proxy.caPath,
                                     "--encoding", "pcm", "--retry-max", "0.5"])
        try send.waitForStdout(lines: 1)
        try viewer.wait(for: "the viewer's first final") { viewer.stdout.lines.count >= 1 }
        let publishing = try #require(instances.first { $0.sessionsStarted == 1 })
        publishing.stop()
        let status = try? send.finish(timeout: 60)
        #expect(status == 0, "\(send.stderr.text)\nproxy: \(proxy.log.suffix(20).joined(separator: "\n"))\nsurvivor: \(instances.first { $0 !== publishing }?.log ?? "")")
        #expect(send.stderr.text.contains("new session"), "\(send.stderr.text)")
        let survivor = try #require(instances.first { $0 !== publishing })
        #expect(survivor.sessionsStarted == 1, "\(survivor.log)")
        if lease != nil { #expect(survivor.log.contains("taken over from session"), "\(survivor.log)") }
        let spoken = Self.texts(send.stdout.text)
        #expect(spoken.count >= 3, "\(send.stdout.text)")
        try? viewer.wait(for: "the viewer's finals", timeout: 90) { Self.texts(viewer.stdout.text).count >= spoken.count }
        #expect(Self.texts(viewer.stdout.text) == spoken, "viewer:\n\(viewer.stdout.text)\ntalker:\n\(send.stdout.text)\nviewer's log: \(viewer.stderr.text)\nsurvivor: \(survivor.log)")
        viewer.interrupt()
        #expect(try viewer.finish() == 0, "\(viewer.stderr.text)")
    }

    /// The texts of `[start → end] text` lines, without their times (a talker's and a viewer's
    /// timelines differ once the talker has gone on in a new session).
    static func texts(_ output: String) -> [String] {
        output.split(separator: "\n").map { line in
            line.firstIndex(of: "]").map { String(line[line.index(after: $0)...]).trimmingCharacters(in: .whitespaces) } ?? String(line)
        }
    }

    static func words(_ text: String) -> [String] {
        text.split(separator: "\n").flatMap { line -> [String] in
            let body = line.split(separator: "]", maxSplits: 1).last ?? ""
            return body.lowercased().split { !$0.isLetter && $0 != "'" }.map(String.init)
        }
    }

    /// The longest common subsequence of two word lists, as a fraction of the longer.
    static func overlap(_ a: [String], _ b: [String]) -> Double {
        guard !a.isEmpty || !b.isEmpty else { return 1 }
        var row = [Int](repeating: 0, count: b.count + 1)
        for x in a {
            var diagonal = 0
            for (j, y) in b.enumerated() {
                let above = row[j + 1]
                row[j + 1] = x == y ? diagonal + 1 : max(row[j + 1], row[j])
                diagonal = above
            }
        }
        return Double(row[b.count]) / Double(max(a.count, b.count))
    }
}
