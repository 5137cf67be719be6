import Foundation
import StenoSpeech
import Testing
@testable import StenoServer

/// Admission by predicted demand, in memory: the value type fed explicit times and lane work,
/// so ramps of talkers and thousands of quiet sessions take no sockets, models or real time.
@Suite struct AdmissionTests {
    static let calm = RecognizerLoad(capacity: 8, busy: 0, waiting: 0)

    /// Sessions whose lanes work at a steady rate (workers' time per second) once they start
    /// speaking, ticked four times a second as the router does.
    struct Simulation {
        struct Session {
            var key: Int
            var rate: Double
            var speaksAt: Double
            var work = 0.0
        }

        var admission = Admission<Int>()
        var sessions: [Session] = []
        var now = 0.0
        var workers = 2
        var nextKey = 0
        /// The most the admitted sessions really took at once (Σ rates of those speaking).
        var peakDemand = 0.0

        mutating func tick(_ dt: Double = 0.25) {
            now += dt
            var work: [(Int, Double)] = []
            for i in sessions.indices where now > sessions[i].speaksAt {
                sessions[i].work += sessions[i].rate * min(dt, now - sessions[i].speaksAt)
                work.append((sessions[i].key, sessions[i].work))
            }
            peakDemand = max(peakDemand, sessions.filter { now > $0.speaksAt }.map(\.rate).reduce(0, +))
            admission.measure(now: now, load: AdmissionTests.calm, lags: [], work: work, workers: workers)
        }

        /// A session asks to come in; admitted unless busy.
        @discardableResult
        mutating func arrive(rate: Double, speaksAfter delay: Double) -> Bool {
            guard !admission.isBusy else { return false }
            let key = nextKey
            nextKey += 1
            admission.opened(key, now: now)
            sessions.append(Session(key: key, rate: rate, speaksAt: now + delay))
            return true
        }

        mutating func run(for seconds: Double) {
            for _ in 0..<Int((seconds / 0.25).rounded()) { tick() }
        }
    }

    /// Issue 15's ramp: talkers arriving 1.5 s apart, each starting to speak a second after it
    /// connects and costing 0.22 of a worker (half speech at RTF ≈ 0.44). On 2 workers at a 0.9
    /// target that is 8 talkers (8 × 0.22 + one more > 1.8); the lag rule took 11 in, because
    /// lag builds only once they have spoken for a while.
    @Test func aRampOfTalkersIsHeldAtTheTargetNotPastIt() {
        var sim = Simulation()
        var admitted = 0, refused = 0
        for _ in 0..<40 {
            if sim.arrive(rate: 0.22, speaksAfter: 1) { admitted += 1 } else { refused += 1 }
            sim.run(for: 1.5)
        }
        #expect((7...8).contains(admitted), "admitted \(admitted)")
        #expect(refused == 40 - admitted)
        #expect(sim.peakDemand <= 0.9 * 2 + 1e-9, "the talkers took \(sim.peakDemand) workers")
        #expect(sim.admission.isBusy && sim.admission.reason == .demand)
        // Once measured over a whole window, a talker is what it costs, not the presumption.
        #expect(abs(sim.admission.talkerDemand - 0.22) < 0.01, "\(sim.admission.talkerDemand)")
    }

    /// Talkers that arrive faster than the window: each is counted in full from its first
    /// second of speech, so the ramp cannot overshoot by more than those not yet speaking.
    @Test func aFastRampIsCountedAsItsTalkersStartToSpeak() {
        var sim = Simulation()
        sim.admission.presumedTalker = 0.22
        var admitted = 0
        for _ in 0..<30 {
            if sim.arrive(rate: 0.22, speaksAfter: 0.5) { admitted += 1 }
            sim.run(for: 1)
        }
        #expect((7...8).contains(admitted), "admitted \(admitted)")
        #expect(sim.peakDemand <= 0.9 * 2 + 1e-9)
    }

    @Test func refusalHasHysteresisAndClosedSessionsLeaveTheSum() {
        var admission = Admission<Int>()
        admission.presumedTalker = 0.2
        // Seven talkers measured over a whole window at 0.2 of a worker: 1.4 + 0.2 = 1.6 of 2.
        for key in 0..<7 { admission.opened(key, now: 0) }
        var now = 0.0
        func measure(_ keys: Range<Int>, rate: Double) {
            now += 1
            admission.measure(now: now, load: Self.calm, lags: [], work: keys.map { ($0, rate * now) }, workers: 2)
        }
        for _ in 0..<20 { measure(0..<7, rate: 0.2) }
        #expect(!admission.isBusy)
        #expect(abs(admission.utilization - 0.8) < 0.02, "\(admission.utilization)")
        // An eighth and a ninth: 1.8 + 0.2 of 2 is over 0.9.
        admission.opened(7, now: now)
        admission.opened(8, now: now)
        for _ in 0..<20 { measure(0..<9, rate: 0.2) }
        #expect(admission.isBusy && admission.reason == .demand, "\(admission.utilization)")
        // One leaves: 1.6 + 0.2 = 0.9 is not under 0.9 − 0.05: still refused.
        admission.closed(8)
        for _ in 0..<20 { measure(0..<8, rate: 0.2) }
        #expect(admission.isBusy, "\(admission.utilization)")
        // Another: 1.4 + 0.2 = 0.8, admitted again.
        admission.closed(7)
        measure(0..<7, rate: 0.2)
        #expect(!admission.isBusy, "\(admission.utilization)")
    }

    /// Thousands of connected quiet sessions (streaming silence, or sending nothing) leave room
    /// for talkers, arriving all at once as much as in a steady state.
    @Test func thousandsOfQuietSessionsLeaveRoomForTalkers() {
        var admission = Admission<Int>()
        // 200 stream silence (≈0.002 of a worker each: the ingest and the speech detector's
        // gate), 9,800 send nothing at all (DTX, silence suppression); all connect within a
        // second, and a talker speaks among them.
        for key in 0..<10_001 { admission.opened(key, now: Double(key) / 10_000) }
        var now = 1.0
        for _ in 0..<120 {
            now += 0.25
            let work = (0..<200).map { ($0, 0.002 * now) } + [(10_000, 0.22 * now)]
            admission.measure(now: now, load: Self.calm, lags: [], work: work, workers: 2)
            #expect(!admission.isBusy, "quiet sessions refused talkers at \(now) s: \(admission.utilization)")
        }
        // 200 × 0.002 + the talker + one more talker, of 2 workers.
        #expect(abs(admission.utilization - (0.4 + 0.44) / 2) < 0.02, "\(admission.utilization)")
        // Streaming silence is not talking: the newcomer is counted at the one talker's cost.
        #expect(abs(admission.talkerDemand - 0.22) < 0.01, "\(admission.talkerDemand)")
        // Those that sent nothing for a whole window are no longer followed.
        #expect(admission.trackedCount == 201, "\(admission.trackedCount)")
    }

    /// A session quiet for longer than the window is forgotten; when it talks again it is
    /// counted by what it does from then on.
    @Test func aSessionBackFromSilenceIsCountedAgain() {
        var admission = Admission<Int>()
        admission.opened(1, now: 0)
        var now = 0.0
        for _ in 0..<80 {
            now += 0.25
            admission.measure(now: now, load: Self.calm, lags: [], workers: 1)
        }
        #expect(admission.trackedCount == 0)
        let quiet = admission.utilization
        // It talks at 0.5 of a worker for a whole window from its lane's total of 3 s.
        let back = now
        for _ in 0..<60 {
            now += 0.25
            admission.measure(now: now, load: Self.calm, lags: [], work: [(1, 3 + 0.5 * (now - back))], workers: 1)
        }
        #expect(admission.trackedCount == 1)
        // Itself and a newcomer at its cost (the only talker), of one worker.
        #expect(abs(admission.utilization - 2 * 0.5) < 0.03, "\(quiet) → \(admission.utilization)")
        #expect(admission.isBusy && admission.reason == .demand)
    }

    /// Through the router: a talker whose demand and one more would pass the target makes the
    /// next handshake a 503 `busy` counted as `overload`, and /metrics shows the projection;
    /// once it has gone, sessions are admitted again.
    @Test func theRouterRefusesByDemandAndSaysSoInMetrics() throws {
        let server = MemoryServer { $0.admitUtilization = 0.9 }
        // The manual pool is one worker; a talker is presumed to take 0.5 of it, and any
        // work at all is speech (in memory, lane time per wall second is next to nothing).
        server.router.admission.presumedTalker = 0.5
        server.router.admission.talkerFloor = 0
        let talker = try #require(server.connect().1)
        server.send(talker, MemoryServer.start)
        server.send(talker, audio: MemoryServer.pcm(seconds: 0.5, speech: true))
        server.settle()
        #expect(server.router.admission.isBusy && server.router.admission.reason == .demand)
        #expect(server.metrics.admissionUtilization.value > 0.9)
        #expect(abs(server.metrics.admissionTalkerDemand.value - 0.5) < 1e-9)
        guard server.expectBusyRefusal("admitted past the projected utilization") else { return }
        let exposition = server.metrics.registry.exposition()
        #expect(exposition.contains("steno_admission_utilization "))
        #expect(exposition.contains("steno_admission_talker_demand "))

        // The talker goes: its demand leaves the sum, and the next session is admitted.
        server.disconnect(talker)
        server.settle()
        #expect(!server.router.admission.isBusy, "\(server.router.admission.utilization)")
        #expect(server.connect().0 == .accept)
        #expect(server.metrics.admissionBusy.value == 0)
    }

    /// An engine that recognizes in a worker process of its own (Whisper) costs the machine what
    /// its worker spends, not what the session's lane does: that is charged to the lane, so a
    /// talker whose worker time is most of a core fills the projection, while the same talker
    /// on an engine that costs nothing elsewhere leaves room.
    @Test(arguments: [(0.0, false), (3.0, true)])
    func theEngineWorkersTimeIsTheSessionsDemand(cost: Double, busy: Bool) throws {
        let server = MemoryServer { $0.admitUtilization = 0.9 }
        server.engine.engineSecondsPerSpeechBlock.withLock { $0 = cost }
        let talker = try #require(server.connect().1)
        server.send(talker, MemoryServer.start)
        // 0.5 s of speech: three full blocks of the scripted engine, 9 s of "worker" time.
        server.send(talker, audio: MemoryServer.pcm(seconds: 0.5, speech: true))
        server.settle()
        #expect(server.router.admission.isBusy == busy, "\(server.router.admission.utilization)")
        if busy {
            #expect(server.router.admission.reason == .demand)
            #expect(server.router.admission.utilization > 0.9)
        }
    }
}
