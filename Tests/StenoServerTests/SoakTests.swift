import Foundation
import StenoCore
import Testing
@testable import StenoServer

#if canImport(Glibc)
import Glibc
import StenoTestSupport
#endif

/// The short soak of `make test` (issue 12): one `steno serve` child process, sessions churned
/// against it for `churnSeconds` by several clients at once, and then the checks a leak would
/// fail, by counts: every gauge of sessions and connections back to 0, the process's open
/// descriptors and threads back to where they were after the warm-up, every session that ended
/// with all its finals, and a new session served normally. Resident memory is printed, and
/// only growth no noise explains fails. The long run with RSS sampled over minutes is
/// `scripts/soak.sh` (docs/reliability.md); this one is short enough to run on every `make test`.
///
/// Timings are not asserted: the churn stops starting sessions after `churnSeconds`, however
/// few it ran on a busy machine, and the waits are generous guards.
@Suite struct SoakTests {
    static let churnSeconds = 40.0
    /// Session clients and viewer clients running at once.
    static let sessionClients = 3
    static let viewerClients = 2
    static let seed: UInt64 = 0x50A6_2026
    /// Descriptors and threads the server may hold above its post-warm-up count once the churn
    /// has settled: libdispatch's worker threads come and go with load, and a lazily made pool
    /// may take a descriptor. A leak per session or connection is tens over this run.
    static let slack = 8
    /// Growth of resident memory (after the warm-up) no allocator noise explains: more than a
    /// recognizer (≈95 MB), and the server has all it may make (`--recognizers 2`) by then.
    static let rssGrowthLimitMB = 100.0

    /// What a session does.
    enum Kind: String, CaseIterable, Sendable {
        /// All of a short input, then `end`: `ended`, close 1000, the reference's finals;
        /// published on the client's channel, where the viewers may follow it.
        case ended
        /// Part of an input, `finalize`, the rest, `end`: the reference's finals for that finalize.
        case finalized
        /// Part, then `cancel`: `cancelled`, close 1000, finals a prefix of the reference's.
        case cancelled
        /// Part, then the socket closed with no close frame (the session waits for a resume).
        case vanished
        /// Part, then half a frame and the socket closed.
        case torn
        /// A message that is not JSON and a PCM message that is not whole samples amid the
        /// audio (non-fatal errors), then `end`: the same finals as without them.
        case badInput
        /// Audio before `start` (4400) or an unsupported format (1003).
        case refused
    }

    struct Outcome: Sendable {
        /// Nil for a viewer.
        var kind: Kind?
        var record: SessionRecord
        var what: String
    }

    /// Every session sends this line of Endgame (3.6 s, three utterances): short, so that a
    /// busy machine still runs many sessions.
    static let endgame = FormatInputs.pcm24k
    /// Where `finalized` sessions finalize: 1.8 s, between the second utterance and the third.
    static let finalizeIndex = 18
    static let finalize = #"{"type":"finalize"}"#

    /// One session of `kind` against `port`; what the client saw, for the test's thread to check.
    static func session(_ kind: Kind, port: Int, channel: String, random: inout SplitMix) throws -> Outcome {
        let client = try StenoClient(port: port)
        let input = endgame
        let cut = Int.random(in: 3...(input.messages.count - 3), using: &random)
        var what = "\(kind.rawValue)"
        switch kind {
        case .ended:
            try client.start(input, extra: #""channel":"\#(channel)""#)
            try client.send(audio: input.messages, of: input)
            try client.end()
        case .finalized:
            try client.start(input)
            try client.send(audio: Array(input.messages[..<finalizeIndex]), of: input)
            try client.send(finalize)
            _ = try client.waitFor("finalized")
            try client.send(audio: Array(input.messages[finalizeIndex...]), of: input)
            try client.end()
        case .cancelled:
            try client.start(input)
            try client.send(audio: Array(input.messages[..<cut]), of: input)
            try client.send(#"{"type":"cancel"}"#)
            try client.readUntilClose()
            what += " after \(cut) messages"
        case .vanished:
            try client.start(input)
            try client.send(audio: Array(input.messages[..<cut]), of: input)
            client.disconnect()
        case .torn:
            try client.start(input)
            try client.send(audio: Array(input.messages[..<cut]), of: input)
            let frame = WebSocketTestClient.encodeFrame(opcodeValue: 2, input.messages[cut])
            try client.ws.sendRaw(Array(frame.prefix(frame.count / 2)))
            client.disconnect()
        case .badInput:
            try client.start(input)
            try client.send(audio: Array(input.messages[..<cut]), of: input)
            try client.send("this is not {json")
            try client.send(audio: [[1, 2, 3]], of: input)
            try client.send(audio: Array(input.messages[cut...]), of: input)
            try client.end()
        case .refused:
            if Bool.random(using: &random) {
                try client.ws.sendBinary(input.messages[0])
                what += " (audio before start)"
            } else {
                try client.send(#"{"type":"start","audio":{"encoding":"opus","sampleRate":44100,"channels":1}}"#)
                what += " (unsupported audio)"
            }
            try client.readUntilClose()
        }
        return Outcome(kind: kind, record: client.record, what: what)
    }

    /// A viewer of one of the session clients' channels: joins, reads for a while (a publisher
    /// may come, talk and go meanwhile), and leaves with a close frame or by vanishing.
    static func view(port: Int, channel: String, random: inout SplitMix) throws -> Outcome {
        let viewer = try StenoClient(port: port, path: "/v1/listen?channel=\(channel)")
        _ = try viewer.waitFor("joined")
        let stay = Deadline(Double.random(in: 0.2...3, using: &random))
        while !stay.hasPassed && !viewer.isClosed {
            try viewer.readAvailable()
            usleep(20_000)
        }
        let record = viewer.record
        if Bool.random(using: &random) {
            _ = try? viewer.ws.close(timeout: 10)
        } else {
            viewer.disconnect()
        }
        return Outcome(kind: nil, record: record, what: "viewer of \(channel)")
    }

    @Test func churningSessionsLeaveNothingBehind() throws {
        let began = ContinuousClock.now
        var phases: [String] = []
        func phase(_ name: String) {
            let d = ContinuousClock.now - began
            phases.append("\(name) \(d.components.seconds) s")
        }
        let process = try ServeProcess([
            "serve", "--engine", "pocketsphinx", "--port", "0", "--log-level", "warning",
            // At most two shared recognizers, both made in the warm-up, so resident memory
            // after it is the churn's alone.
            "--recognizers", "2", "--workers", "2",
            // A dropped session waits 2 s for a resume (the path is exercised, briefly).
            "--resume-seconds", "2",
            // A loaded machine must not turn the churn into refusals, idle closes, stall
            // finalizes (which change the finals) or keepalive hang-ups (the test clients
            // answer pings only while they read).
            "--lag-target", "0", "--idle-timeout", "0", "--stall-seconds", "0", "--keepalive", "0",
            "--max-sessions", "32",
        ])
        let port = process.port
        let server = ServerProbe(pid: process.pid, port: port)
        let channels = (0..<Self.sessionClients).map { "soak-\($0)" }

        phase("server up")
        // Warm-up: two sessions speaking at once (both recognizers lent), a viewer, a channel;
        // then the counts once the server is idle again are the baseline. What the two
        // sessions got, alone on the server, is what every later session of their kind must
        // get (that the server's finals are LocalSession's is ServerEndToEndTests' business;
        // making them here would load a model into this process too).
        let warmUp = onThreads([
            { @Sendable () throws -> SessionRecord in
                var random = SplitMix(seed: Self.seed)
                return try Self.session(.ended, port: port, channel: channels[0], random: &random).record
            },
            { @Sendable () throws -> SessionRecord in
                var random = SplitMix(seed: Self.seed)
                return try Self.session(.finalized, port: port, channel: channels[1], random: &random).record
            },
            { @Sendable () throws -> SessionRecord in
                var random = SplitMix(seed: Self.seed)
                return try Self.view(port: port, channel: channels[0], random: &random).record
            },
        ])
        let ended = try warmUp[0].get(), finalized = try warmUp[1].get()
        _ = try warmUp[2].get()
        expectEndedNormally(ended, audio: Self.endgame.duration, "warm-up session")
        expectEndedNormally(finalized, audio: Self.endgame.duration, "warm-up finalized session")
        let endgameFinals = ended.events.finals
        let finalizedFinals = finalized.events.finals
        #expect(endgameFinals.count >= 2 && finalizedFinals.count >= 2, "\(endgameFinals) \(finalizedFinals)")
        let through = finalized.events.first("finalized")?.number("through") ?? -1
        #expect(abs(through - Double(Self.finalizeIndex) * 0.1) < 0.0015, "finalized through \(through)")
        #expect(finalizedFinals.allSatisfy { $0.end <= through + 0.0015 || $0.start >= through - 0.0015 },
                "no final spans the finalize at \(through): \(finalizedFinals)")
        #expect(eventually(timeout: 60) { server.gaugesAtRest() && server.metric("steno_recognizers_made") == 2 },
                "after the warm-up: \(server.gauges())")
        let base = server.sample()
        phase("warmed up")

        // The churn.
        let deadline = ContinuousClock.now + .milliseconds(Int(Self.churnSeconds * 1000))
        let sessionJobs: [@Sendable () throws -> [Outcome]] = (0..<Self.sessionClients).map { n in
            { @Sendable in
                var random = SplitMix(seed: Self.seed &+ UInt64(n))
                var outcomes: [Outcome] = []
                // Each client goes through every kind in turn from a place of its own, so that
                // a busy machine that runs only a few sessions still runs each kind; what is
                // cut where, and what the viewers do, is random.
                var next = n * Kind.allCases.count / Self.sessionClients
                while ContinuousClock.now < deadline {
                    let kind = Kind.allCases[next % Kind.allCases.count]
                    next += 1
                    outcomes.append(try Self.session(kind, port: port, channel: channels[n], random: &random))
                }
                return outcomes
            }
        }
        let viewerJobs: [@Sendable () throws -> [Outcome]] = (0..<Self.viewerClients).map { n in
            { @Sendable in
                var random = SplitMix(seed: Self.seed &+ 100 &+ UInt64(n))
                var outcomes: [Outcome] = []
                while ContinuousClock.now < deadline {
                    outcomes.append(try Self.view(port: port, channel: channels.randomElement(using: &random)!, random: &random))
                }
                return outcomes
            }
        }
        let results = onThreads(sessionJobs + viewerJobs)
        phase("churned")
        var counts: [String: Int] = [:]
        var viewers = 0
        for result in results {
            for outcome in try result.get() {
                guard let kind = outcome.kind else {
                    viewers += 1
                    let events = outcome.record.events
                    #expect(events.first?.type == "joined", "\(outcome.what): \(events.types)")
                    #expect(events.map(\.seq) == Array(0..<events.count).map { $0 + 1 },
                            "\(outcome.what): seq \(events.map(\.seq))")
                    #expect(Set(events.types).isSubset(of: ["joined", "publisher", "final", "volatile", "speech"]),
                            "\(outcome.what): \(Set(events.types))")
                    continue
                }
                counts[kind.rawValue, default: 0] += 1
                Self.check(outcome, kind, endgameFinals: endgameFinals, finalizedFinals: finalizedFinals)
            }
        }

        // Settled: dropped sessions have waited for their resume, lingering closes are over.
        var end = server.sample()
        _ = eventually(timeout: 60) {
            end = server.sample()
            return server.gaugesAtRest() && end.descriptors <= base.descriptors + Self.slack
                && end.threads <= base.threads + Self.slack
        }
        phase("settled")
        let gauges = server.gauges()
        for (name, value) in gauges {
            #expect(abs(value) < 1e-9, "\(name) is \(value) after the churn")
        }
        #expect(end.descriptors <= base.descriptors + Self.slack,
                "open descriptors: \(base.descriptors) after the warm-up, \(end.descriptors) after the churn\n\(server.descriptors())")
        #expect(end.threads <= base.threads + Self.slack,
                "threads: \(base.threads) after the warm-up, \(end.threads) after the churn\n\(server.threadNames())")
        #expect(server.metric(#"steno_errors_total{code="internal"}"#) == 0)

        // A new session is served as the first was.
        let next = try StenoClient(port: port)
        try next.start(Self.endgame)
        try next.send(audio: Self.endgame.messages, of: Self.endgame)
        try next.end()
        expectEndedNormally(next, audio: Self.endgame.duration, "the session after the churn")
        #expect(next.events.finals == endgameFinals, "the session after the churn")

        phase("served again")
        let sessions = counts.values.reduce(0, +)
        let growth = Double(end.rssKB - base.rssKB) / 1024
        let load = (try? String(contentsOfFile: "/proc/loadavg", encoding: .utf8))?.split(separator: " ").prefix(3).joined(separator: " ") ?? "?"
        print("soak: \(sessions) sessions (\(counts.sorted { $0.key < $1.key }.map { "\($0.key) \($0.value)" }.joined(separator: ", "))) "
              + "and \(viewers) viewers in \(Int(Self.churnSeconds)) s; RSS \(base.rssKB / 1024) MB after the warm-up, "
              + "\(end.rssKB / 1024) MB after the churn (\(String(format: "%+.1f", growth)) MB); descriptors \(base.descriptors) → "
              + "\(end.descriptors); threads \(base.threads) → \(end.threads); load average \(load); " + phases.joined(separator: ", "))
        #expect(growth < Self.rssGrowthLimitMB, "resident memory grew \(growth) MB over the churn")

        // And it still drains and exits cleanly.
        process.signal(SIGTERM)
        #expect(eventually(timeout: 60) { process.pollExit() != nil }, "steno serve did not exit after SIGTERM")
        #expect(process.pollExit() == 0, "exit status \(process.pollExit().map(String.init) ?? "none")\n\(process.log)")
    }

    /// What each kind of session must have seen.
    static func check(_ outcome: Outcome, _ kind: Kind, endgameFinals: [TestResult], finalizedFinals: [TestResult],
                      sourceLocation: SourceLocation = #_sourceLocation) {
        let record = outcome.record
        let what = outcome.what
        switch kind {
        case .ended:
            expectEndedNormally(record, audio: endgame.duration, what, sourceLocation: sourceLocation)
            #expect(record.events.finals == endgameFinals, "\(what)", sourceLocation: sourceLocation)
        case .finalized:
            expectEndedNormally(record, audio: endgame.duration, what, sourceLocation: sourceLocation)
            #expect(record.events.finals == finalizedFinals, "\(what)", sourceLocation: sourceLocation)
        case .badInput:
            expectEndedNormally(record, audio: endgame.duration, what, allowErrors: true, sourceLocation: sourceLocation)
            #expect(record.events.errors.compactMap(\.errorCode).sorted() == ["bad_audio", "bad_message"],
                    "\(what): \(record.events.errors)", sourceLocation: sourceLocation)
            #expect(record.events.finals == endgameFinals, "\(what)", sourceLocation: sourceLocation)
        case .cancelled:
            expectWellFormed(record.events, audio: endgame.duration, what, sourceLocation: sourceLocation)
            #expect(record.events.last?.type == "cancelled", "\(what): \(record.events.types)", sourceLocation: sourceLocation)
            #expect(record.closeCode == 1000, "\(what): close \(record.closeCode.map(String.init) ?? "none")",
                    sourceLocation: sourceLocation)
            let finals = record.events.finals
            #expect(Array(endgameFinals.prefix(finals.count)) == finals, "\(what): \(finals)", sourceLocation: sourceLocation)
        case .vanished, .torn:
            // Gone with a volatile perhaps pending, so only the start of the stream is checked.
            #expect(record.events.first?.type == "ready", "\(what): \(record.events.types)", sourceLocation: sourceLocation)
            #expect(record.events.map(\.seq) == Array(0..<record.events.count).map { $0 + 1 }, "\(what): seq",
                    sourceLocation: sourceLocation)
        case .refused:
            expectFatal(record, what.contains("before start") ? "not_started" : "unsupported_audio",
                        close: what.contains("before start") ? 4400 : 1003, what, sourceLocation: sourceLocation)
        }
    }
}

/// The `steno serve` process seen from outside: its /proc entries and its /metrics.
struct ServerProbe: Sendable {
    let pid: pid_t
    let port: Int

    struct Sample {
        var descriptors: Int
        var threads: Int
        var rssKB: Int
    }

    func sample() -> Sample {
        let status = (try? String(contentsOfFile: "/proc/\(pid)/status", encoding: .utf8)) ?? ""
        let rss = status.split(separator: "\n").first { $0.hasPrefix("VmRSS:") }
            .flatMap { Int($0.split(separator: " ")[1]) } ?? 0
        return Sample(descriptors: entries("fd").count, threads: entries("task").count, rssKB: rss)
    }

    private func entries(_ folder: String) -> [String] {
        (try? FileManager.default.contentsOfDirectory(atPath: "/proc/\(pid)/\(folder)")) ?? []
    }

    /// What each descriptor is, for a failure's message.
    func descriptors() -> String {
        entries("fd").compactMap { fd in
            (try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/\(pid)/fd/\(fd)")).map { "\(fd) → \($0)" }
        }.sorted().joined(separator: "\n")
    }

    func threadNames() -> String {
        entries("task").compactMap { task in
            (try? String(contentsOfFile: "/proc/\(pid)/task/\(task)/comm", encoding: .utf8))?
                .trimmingCharacters(in: .whitespacesAndNewlines)
        }.sorted().joined(separator: ", ")
    }

    func metrics() -> [String: Double] {
        guard let response = try? HTTPTestClient.get(port: port, "/metrics"), response.status == 200 else { return [:] }
        return LiveServer.parseMetrics(response.bodyText)
    }

    func metric(_ series: String) -> Double? { metrics()[series] }

    /// The gauges of what is open or in flight, and /healthz's counts: all 0 at rest.
    func gauges() -> [(String, Double)] {
        let m = metrics()
        var gauges = ["steno_sessions_active", "steno_viewers_active", "steno_outbound_queue_bytes",
                      "steno_inbound_buffered_audio_seconds", "steno_recognizers_busy",
                      "steno_recognizer_waiting_sessions", "steno_workers_busy",
                      "steno_worker_queue_depth"].map { ($0, m[$0] ?? .nan) }
        gauges += m.filter { $0.key.hasPrefix("steno_channel_viewers{") }.map { ($0.key, $0.value) }
        let health = (try? HTTPTestClient.get(port: port, "/healthz")).flatMap { try? WireEvent($0.bodyText) }
        for key in ["sessions", "viewers"] {
            gauges.append(("/healthz \(key)", health?.number(key) ?? .nan))
        }
        return gauges
    }

    func gaugesAtRest() -> Bool { gauges().allSatisfy { abs($0.1) < 1e-9 } }
}
