// steno-bench capacity: one round of N sessions against a fresh server (CapacityBench.swift).
import Foundation
import StenoAudio
import StenoCore
import StenoSpeech
import StenoSystem
import StenoTestSupport

#if canImport(Glibc)
import Glibc
#endif

// MARK: - One round

struct CapacityRow {
    var sessions: Int
    var design: CapacityDesign
    var admitted = 0
    var refused = 0
    var refusalText = ""
    /// With `--retry`: how long after its first attempt each talker let in on a retry was.
    var admittedOnRetry: [Double] = []
    var failed = 0
    var lagP50 = 0.0, lagP95 = 0.0
    /// Fairness: the lowest and highest of the admitted sessions' own lag p95.
    var sessionLagP95Low = 0.0, sessionLagP95High = 0.0
    /// Sessions whose finals did not come in timeline order, or overlapped.
    var finalsOutOfOrder = 0
    /// Admission: the highest projected utilization seen (`steno_admission_utilization`), the
    /// talker demand then, and the workers' busy ÷ CPU seconds (over 1: they waited for cores).
    var peakUtilization = 0.0, talkerDemandAtPeak = 0.0, busyOverCPU = 0.0
    /// What admission had measured by the end of the round: a talker's demand, its cost per
    /// second of speech and its share of time speaking.
    var talkerDemandAtEnd = 0.0, speechCost = 0.0, speechFraction = 0.0
    var finalP50 = 0.0, finalP95 = 0.0
    var finalsTimed = 0
    var cpuPerAudioSecond = 0.0
    var rssMB = 0.0
    var rssPerSessionMB = 0.0
    var wordErrors = 0, referenceWords = 0
    var audioSeconds = 0.0
    var speechSeconds = 0.0
    /// CPU seconds of the client thread(s) over the round.
    var clientCPU = 0.0
    /// The engine fed the same streams alongside (`--floor-counts`): its CPU per audio second.
    var floorCPUPerAudioSecond: Double?

    var wer: Double { referenceWords > 0 ? Double(wordErrors) / Double(referenceWords) : 0 }

    var line: String {
        [rightAligned("\(sessions)", 2), pad(design.rawValue, 10), rightAligned("\(admitted)", 9),
         pad("  \(refused)\(refusalText.isEmpty ? "" : " (\(refusalText))")" + (failed > 0 ? ", \(failed) failed" : ""), 27),
         rightAligned(format(lagP50, 2) + " s", 7), rightAligned(format(lagP95, 2) + " s", 8),
         rightAligned(format(sessionLagP95Low, 2) + "–" + format(sessionLagP95High, 2) + " s", 13),
         rightAligned(format(finalP50, 2) + " s", 9), rightAligned(format(finalP95, 2) + " s", 10),
         rightAligned(format(cpuPerAudioSecond * 1000, 0), 15), rightAligned(format(rssMB, 0), 7), rightAligned(format(rssPerSessionMB, 1), 11),
         pad(rightAligned(format(wer * 100, 1) + " % (\(wordErrors)/\(referenceWords))", 16), 18),
         rightAligned(format(busyOverCPU, 2), 8), rightAligned(format(clientCPU, 2) + " s", 11)].joined(separator: " ")
            + (finalsOutOfOrder > 0 ? "  finals out of order in \(finalsOutOfOrder) sessions" : "")
    }

    var admissionLine: String {
        "\(sessions) \(design.rawValue): projected utilization at most \(format(peakUtilization, 2)) (a talker then "
            + "\(format(talkerDemandAtPeak, 3)) of a worker); at the end a talker \(format(talkerDemandAtEnd, 3)) = "
            + "\(format(speechCost, 3)) per speech second × \(format(speechFraction, 2)) speech; workers' busy ÷ CPU time \(format(busyOverCPU, 2))"
    }
}

enum SessionOutcome {
    case refused(status: Int, reason: String, retryAfter: String?)
    case failed(String)
    case streamed(StreamedSession, progress: [(at: Double, lag: Double)], finals: [(at: Double, start: Double, end: Double, text: String)])
}

func measureCapacity(steno: String, engine: String, design: CapacityDesign, plans: [SessionPlan], seconds: Double,
                     admission: Bool, serveOptions: [String], client: CapacityClient, retry: Double? = nil,
                     floor: Bool) -> CapacityRow? {
    let n = plans.count
    // The old design, a decoder per session, is a server of the bench's own (BenchServers.swift).
    let (program, command) = design == .dedicated
        ? (benchExecutable, ["dedicated-server"])
        : (steno, ["serve", "--engine", engine, "--port", "0", "--idle-timeout", "0", "--log-level", "warning", "--web-root", "/nonexistent"])
    var arguments = command
    if !admission { arguments += ["--lag-target", "0"] }
    // After the options given: the old design's decoders are its own count.
    arguments += serveOptions
    if design == .dedicated { arguments += ["--recognizers", "\(n)"] }
    guard let server = Child.spawn(program, arguments, stdout: true), let port = server.readPort() else { return nil }
    defer { server.terminate(SIGKILL) }
    // With `--spare-recognizers`, that many are made at start, the rest as speech needs them.
    let spares = serveOptions.firstIndex(of: "--spare-recognizers").flatMap { Int(serveOptions[$0 + 1]) }
    guard waitForRecognizers(port: port, spares: spares) != nil else { return nil }
    // A first short session, so that no measured one pays for first use (caches, a decoder's
    // first search); then the memory with no session.
    if let ws = try? WebSocketTestClient.connect(port: port, timeout: 30) {
        _ = try? streamSession(ws, start: startMessage, frames: Array(plans[0].frames.prefix(150)), realTime: false) { _, _, _, _ in }
    }
    usleep(300_000)
    let rssIdle = familyUsage(server.pid).residentMB
    // The floor's processes, loaded before the round so that they start with it.
    let engines = floor ? EngineProcesses(count: n) : nil
    if floor && engines == nil { print("  \(n) sessions: the floor's pocketsphinx_continuous could not be run") }

    var row = CapacityRow(sessions: n, design: design)
    let outcomes = Locked<[Int: SessionOutcome]>([:])
    let began = monotonicSeconds() + 0.2
    let cpuBefore = familyUsage(server.pid).cpu
    let floorCounters = Locked<ProcessCounters?>(nil)
    let floorThread = engines.map { engines in
        Thread {
            let streams = plans.map { EngineStream(delay: $0.delay, pcm: $0.frames.flatMap { $0 }) }
            let counters = engines.feed(streams, from: began)
            floorCounters.withLock { $0 = counters }
        }
    }
    floorThread?.start()
    let clientCPU = Locked(0.0)
    let retried = Locked<[Double]>([])
    let threads: [Thread]
    switch client {
    case .threads:
        threads = plans.map { plan in
            Thread {
                let wait = began + plan.delay - monotonicSeconds()
                if wait > 0 { usleep(UInt32(wait * 1e6)) }
                // The session runs outside the lock: inside it, the sessions ran one after another.
                let (outcome, after) = runPlannedSession(port: port, plan: plan, retryFor: retry)
                outcomes.withLock { $0[plan.session] = outcome }
                if let after { retried.withLock { $0.append(after) } }
                let cpu = threadCPUSeconds()
                clientCPU.withLock { $0 += cpu }
            }
        }
    case .epoll:
        threads = [Thread {
            let talkers = EpollTalkers(port: port, began: began, start: startMessage,
                                       plans: plans.map { EpollTalkers.Plan(delay: $0.delay, frames: $0.frames) })
            var events = [SessionEvents](repeating: SessionEvents(), count: plans.count)
            let results = talkers.run { talker, type, event, at in events[talker].take(type, event, at: at) }
            var all: [Int: SessionOutcome] = [:]
            for (i, result) in results.enumerated() {
                switch result {
                case .refused(let response): all[plans[i].session] = refusal(response)
                case .failed(let why): all[plans[i].session] = .failed(why)
                case .streamed(let record):
                    all[plans[i].session] = .streamed(record, progress: events[i].progress, finals: events[i].finals)
                }
            }
            outcomes.withLock { $0 = all }
            let cpu = threadCPUSeconds()
            clientCPU.withLock { $0 += cpu }
        }]
    }
    threads.forEach { $0.start() }
    // Memory while every admitted session streams: the most seen, sampled twice a second.
    // And what admission decided on, every 2 s: the highest projected utilization, the talker
    // demand then, and the workers' wall-clock over CPU time in their jobs over the round.
    var rssPeak = rssIdle
    let workBefore = scrapeMetrics(port: port) ?? [:]
    var polls = 0
    while threads.contains(where: { !$0.isFinished }) {
        usleep(500_000)
        rssPeak = max(rssPeak, familyUsage(server.pid).residentMB)
        polls += 1
        if polls % 4 == 0, let sample = scrapeMetrics(port: port),
           let utilization = sample["steno_admission_utilization"], utilization > row.peakUtilization {
            row.peakUtilization = utilization
            row.talkerDemandAtPeak = sample["steno_admission_talker_demand"] ?? 0
        }
    }
    let cpuAfter = familyUsage(server.pid).cpu
    let metrics = scrapeMetrics(port: port) ?? [:]
    let busy = (metrics["steno_worker_busy_seconds_total"] ?? 0) - (workBefore["steno_worker_busy_seconds_total"] ?? 0)
    let workerCPU = (metrics["steno_worker_cpu_seconds_total"] ?? 0) - (workBefore["steno_worker_cpu_seconds_total"] ?? 0)
    row.busyOverCPU = workerCPU > 0 ? busy / workerCPU : 0
    row.talkerDemandAtEnd = metrics["steno_admission_talker_demand"] ?? 0
    row.speechCost = metrics["steno_admission_speech_cost"] ?? 0
    row.speechFraction = metrics["steno_admission_speech_fraction"] ?? 0

    var streamed: [(SessionPlan, StreamedSession, [(at: Double, lag: Double)], [(at: Double, start: Double, end: Double, text: String)])] = []
    var reasons: [String: Int] = [:]
    let all = outcomes.withLock { $0 }
    for plan in plans {
        switch all[plan.session] {
        case .refused(let status, let reason, let retryAfter)?:
            row.refused += 1
            reasons["\(status) \(reason)\(retryAfter.map { ", Retry-After \($0)" } ?? ", no Retry-After")", default: 0] += 1
        case .failed(let why)?:
            row.failed += 1
            print("  session \(plan.session) failed: \(why)")
        case .streamed(let record, let progress, let finals)?:
            streamed.append((plan, record, progress, finals))
        case nil:
            row.failed += 1
        }
    }
    row.admitted = streamed.count
    var counted: [String] = reasons.keys.sorted().map { "\($0)" }
    let byMetrics = StenoMetricsReasons.map { ($0, Int(metrics[#"steno_handshakes_refused_total{reason="\#($0)"}"#] ?? 0)) }
        .filter { $0.1 > 0 }.map { "\($0.0) \($0.1)" }
    if !byMetrics.isEmpty { counted.append("/metrics " + byMetrics.joined(separator: ", ")) }
    row.admittedOnRetry = retried.withLock { $0 }.sorted()
    if let first = row.admittedOnRetry.first, let last = row.admittedOnRetry.last {
        counted.append("\(row.admittedOnRetry.count) let in on a retry after \(format(first, 1))–\(format(last, 1)) s")
    }
    row.refusalText = counted.joined(separator: "; ")

    // While every admitted session streamed: from the last one's start, for `seconds` (or to the
    // first one's end). A session streams until the round's last one would have streamed
    // `seconds`, so when the last ones are refused the admitted stream longer in a larger
    // round; without the bound, two rounds that admitted the same sessions would compare
    // different stretches of their speech (12 sessions' six against 8's six: 39 s against 33).
    let windowStart = streamed.map(\.1.startedAt).max() ?? 0
    let windowEnd = min(streamed.map(\.1.endSentAt).min() ?? 0, windowStart + seconds)
    var lags = streamed.flatMap { $0.2.filter { $0.at >= windowStart && $0.at <= windowEnd }.map(\.lag) }
    if lags.isEmpty {
        // Not a measurement of N at once: say so rather than quietly use every lag.
        print("  warning: the \(streamed.count) admitted sessions never all streamed at once; lag over all their progress")
        lags = streamed.flatMap { $0.2.map(\.lag) }
    }
    row.lagP50 = percentile(lags, 0.5)
    row.lagP95 = percentile(lags, 0.95)
    // Fairness under load: every session's own p95 over the same stretch (or all its progress,
    // as above), the lowest and the highest.
    let perSession = streamed.map { entry -> Double in
        let within = entry.2.filter { $0.at >= windowStart && $0.at <= windowEnd }.map(\.lag)
        return percentile(within.isEmpty ? entry.2.map(\.lag) : within, 0.95)
    }
    row.sessionLagP95Low = perSession.min() ?? 0
    row.sessionLagP95High = perSession.max() ?? 0
    // Finals in order: as they arrived, each starts where the one before ended or later.
    row.finalsOutOfOrder = streamed.filter { entry in
        zip(entry.3, entry.3.dropFirst()).contains { $1.start < $0.end - 1e-6 }
    }.count

    var latencies: [Double] = []
    for (plan, record, _, finals) in streamed {
        for utterance in plan.spoken {
            // The final that completes it: the last to arrive of those overlapping it.
            let overlapping = finals.filter { $0.start < utterance.end && $0.end > utterance.start }
            guard let last = overlapping.map(\.at).max(), last < record.endSentAt else { continue }
            let frame = min(record.sendTimes.count - 1, max(0, Int((utterance.end / 0.02).rounded(.up)) - 1))
            guard frame >= 0 else { continue }
            latencies.append(last - record.sendTimes[frame])
        }
        let hypothesis = finals.sorted { $0.start < $1.start }.flatMap { normalizedWords($0.text) }
        let reference = plan.spoken.filter { $0.start < Double(record.sendTimes.count) * 0.02 }.flatMap(\.reference)
        let alignment = align(reference: reference, hypothesis: hypothesis)
        row.wordErrors += alignment.errors
        row.referenceWords += alignment.referenceCount
        row.audioSeconds += plan.audioSeconds
        row.speechSeconds += plan.speechSeconds
    }
    row.finalsTimed = latencies.count
    row.finalP50 = percentile(latencies, 0.5)
    row.finalP95 = percentile(latencies, 0.95)
    row.cpuPerAudioSecond = row.audioSeconds > 0 ? (cpuAfter - cpuBefore) / row.audioSeconds : 0
    row.rssMB = rssPeak
    row.rssPerSessionMB = row.admitted > 0 ? (rssPeak - rssIdle) / Double(row.admitted) : 0
    row.clientCPU = clientCPU.withLock { $0 }
    if let floorThread {
        while !floorThread.isFinished { usleep(50_000) }
        let audio = plans.map(\.audioSeconds).reduce(0, +)
        row.floorCPUPerAudioSecond = floorCounters.withLock { $0 }.map { $0.cpu / audio }
    }
    return row
}

/// The refusal reasons of `steno_handshakes_refused_total` that load or limits give.
let StenoMetricsReasons = ["overload", "capacity", "draining"]

let startMessage = #"{"type":"start","audio":{"encoding":"pcm_s16le","sampleRate":16000,"channels":1},"format":"raw"}"#

/// `runPlannedSession`, trying again after each refusal for up to `retryFor` seconds, as
/// `steno send` does: it waits the refusal's Retry-After (5 s without one). A talker let in on a
/// retry speaks its plan from the start then. Also says, for one let in on a retry, how long
/// after its first attempt.
func runPlannedSession(port: Int, plan: SessionPlan, retryFor: Double?) -> (SessionOutcome, Double?) {
    let first = monotonicSeconds()
    var attempt = first
    while true {
        let outcome = runPlannedSession(port: port, plan: plan)
        guard case .refused(_, _, let retryAfter) = outcome else {
            return (outcome, attempt > first ? attempt - first : nil)
        }
        let wait = retryAfter.flatMap(Double.init) ?? 5
        guard let retryFor, monotonicSeconds() + wait <= first + retryFor else { return (outcome, nil) }
        usleep(UInt32(wait * 1e6))
        attempt = monotonicSeconds()
    }
}

func runPlannedSession(port: Int, plan: SessionPlan) -> SessionOutcome {
    do {
        switch try WebSocketTestClient.attempt(port: port, timeout: 30) {
        case .refused(let response):
            return refusal(response)
        case .upgraded(let ws):
            var events = SessionEvents()
            let record = try streamSession(ws, start: startMessage, frames: plan.frames, realTime: true) { type, event, _, at in
                events.take(type, event, at: at)
            }
            return .streamed(record, progress: events.progress, finals: events.finals)
        }
    } catch {
        return .failed("\(error)")
    }
}

/// A refused upgrade: its status, the reason its JSON body gives (`status`), its Retry-After.
func refusal(_ response: TestHTTPResponse) -> SessionOutcome {
    var reason = "?"
    if case .object(let body)? = try? JSONParser().parse(response.bodyText), case .string(let status)? = body["status"] {
        reason = status
    }
    return .refused(status: response.status, reason: reason, retryAfter: response.header("retry-after"))
}

/// What a round keeps of a session's events: lag of each `progress`, and the finals.
struct SessionEvents {
    var progress: [(at: Double, lag: Double)] = []
    var finals: [(at: Double, start: Double, end: Double, text: String)] = []

    mutating func take(_ type: String, _ event: JSONObject, at: Double) {
        switch type {
        case "progress":
            if case .number(let received)? = event["received"], case .number(let analyzed)? = event["analyzed"] {
                progress.append((at, received - analyzed))
            }
        case "final":
            if case .number(let start)? = event["start"], case .number(let end)? = event["end"],
               case .string(let text)? = event["text"] {
                finals.append((at, start, end, text))
            }
        default:
            break
        }
    }
}
