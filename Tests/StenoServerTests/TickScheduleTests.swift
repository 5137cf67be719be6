import Foundation
import StenoCore
import StenoSession
import StenoSystem
@testable import StenoTransport
import Testing
@testable import StenoServer

/// The router's tick visits only the sessions that are due (`SessionRegistry.schedule`): a
/// talker at every tick, a quiet session only when one of its timers comes. In memory, with
/// the tick's time chosen by the test (`Router.tick(now:)`): each timer fires for a session
/// that the tick does not visit until then, and thousands of quiet sessions cost a tick
/// nothing.
@Suite struct TickScheduleTests {
    final class Item {
        let name: String
        init(_ name: String) { self.name = name }
    }

    @Test func theScheduleGivesWhatIsDueEarliestFirstWithOneEntryPerItem() {
        var schedule = TickSchedule<Item>()
        let items = (0..<200).map { Item("\($0)") }
        // A pseudo-random order of times, each item moved a few times.
        var rng: UInt64 = 7
        func next() -> Double {
            rng = rng &* 6364136223846793005 &+ 1442695040888963407
            return Double((rng >> 33) % 10_000) / 10
        }
        var expected: [ObjectIdentifier: Double] = [:]
        for _ in 0..<3 {
            for item in items {
                let due = next()
                schedule.set(item, at: due)
                expected[ObjectIdentifier(item)] = due
            }
        }
        // Some leave: removed, or set to infinity (nothing due).
        for item in items.prefix(20) { schedule.remove(item); expected[ObjectIdentifier(item)] = nil }
        for item in items.dropFirst(20).prefix(20) { schedule.set(item, at: .infinity); expected[ObjectIdentifier(item)] = nil }
        #expect(schedule.count == 160)
        for item in items { #expect(schedule.due(item) == expected[ObjectIdentifier(item)]) }
        let firstHalf = schedule.takeDue(500)
        #expect(firstHalf.count == expected.values.filter { $0 <= 500 }.count)
        let times = firstHalf.map { expected[ObjectIdentifier($0)]! }
        #expect(times == times.sorted())
        #expect(times.allSatisfy { $0 <= 500 })
        #expect(schedule.takeDue(500).isEmpty, "taken once")
        schedule.set(items[50], at: -.infinity)
        #expect(schedule.takeDue(0).map(\.name) == [items[50].name])
        #expect(schedule.takeDue(.greatestFiniteMagnitude).count == 160 - firstHalf.count - 1)
        #expect(schedule.isEmpty)
    }

    /// A server with no timer on unless the test turns it on.
    static func server(_ configure: (inout ServerOptions) -> Void = { _ in }) -> MemoryServer {
        MemoryServer {
            $0.limits.stallSeconds = 0
            $0.limits.startTimeoutSeconds = 0
            $0.limits.maxSessionSeconds = 0
            configure(&$0)
        }
    }

    static func started(_ server: MemoryServer) throws -> (ConnectionID, StreamSession) {
        let id = try #require(server.connect().1)
        server.send(id, SessionServiceTests.start)
        server.settle()
        return (id, try #require(server.sessions[id]))
    }

    /// Ticks `session` at each time it is due before `limit` (its progress going out, say), as
    /// the router's timer would, lanes run after each; returns when it is due next after that.
    static func due(after limit: Double, _ server: MemoryServer, _ session: StreamSession) throws -> Double {
        var due = try #require(server.sessions.due(session))
        while due < limit {
            server.router.tick(now: due == -.infinity ? SystemClock.now() : due)
            while server.pool.runPending() > 0 {}
            due = try #require(server.sessions.due(session))
        }
        return due
    }

    /// Lag observations so far (the histogram's total count).
    static func lagSamples(_ server: MemoryServer) -> Int { server.metrics.lagSeconds.snapshot.cumulative.last ?? 0 }

    @Test func quietSessionsAreNotVisitedAndATalkerIsUntilItIsQuietAgain() throws {
        let server = Self.server()
        var quiet: [StreamSession] = []
        for _ in 0..<2000 { quiet.append(try Self.started(server).1) }
        server.settle()
        // Started, silent, no timer: nothing is due, ever (until an input).
        #expect(quiet.allSatisfy { server.sessions.due($0) == nil })
        let samples = Self.lagSamples(server)
        server.router.tick(now: SystemClock.now() + 3600)
        #expect(Self.lagSamples(server) == samples, "a quiet session has no lag to sample")

        // A talker is visited at every tick while audio comes, and sampled.
        let (talker, session) = try Self.started(server)
        for _ in 0..<4 {
            server.send(talker, audio: SessionServiceTests.speech(2))
            #expect(server.sessions.due(session) == -.infinity, "a talker is due at the next tick")
            server.settle()
        }
        #expect(Self.lagSamples(server) == samples + 4)
        #expect(server.events(talker).contains { $0.type == "progress" })
        // Its audio stops: one tick finds it quiet (its progress is out), and it leaves.
        server.settle()
        server.router.tick(now: SystemClock.now() + 1.1)
        #expect(server.sessions.due(session) == nil)
        #expect(quiet.allSatisfy { server.sessions.due($0) == nil })
    }

    /// A short batch (the client paused) goes to the lane `batchLinger` after it began, though
    /// no tick visits the session in between.
    @Test func aShortBatchGoesToTheLaneAfterItsLinger() throws {
        let server = Self.server()
        let (id, session) = try Self.started(server)
        let before = SystemClock.now()
        server.send(id, audio: MemoryServer.pcm(samples: 320, speech: true))   // 20 ms: short of a batch
        let after = SystemClock.now()
        server.router.tick(now: before)   // the talker's visit; its progress goes out
        #expect(server.pool.runPending() == 0, "kept for more")
        let due = try #require(server.sessions.due(session))
        #expect(due >= before + DriverOptions().batchLinger && due <= after + DriverOptions().batchLinger,
                "due at the linger, not at every tick")
        server.router.tick(now: due - 0.01)
        #expect(server.pool.runPending() == 0)
        server.router.tick(now: due)
        #expect(server.pool.runPending() == 1, "the batch went to the lane")
        #expect(server.sessions.due(session).map { $0 > due } ?? true)
    }

    @Test func theStartDeadlineFiresForAConnectionThatIsNotVisitedBeforeIt() throws {
        let server = Self.server { $0.limits.startTimeoutSeconds = 10 }
        let opened = SystemClock.now()
        let id = try #require(server.connect().1)
        server.settle()
        let session = try #require(server.sessions[id])
        let due = try #require(server.sessions.due(session))
        #expect(due >= opened + 10 && due <= SystemClock.now() + 10, "due at its deadline only")
        server.router.tick(now: due - 0.1)
        #expect(server.connections.closeRequest(id) == nil)
        server.router.tick(now: due)
        SessionServiceTests.expectFatal(server, id, "idle", close: 4010)
    }

    @Test func theIdleTimeoutFiresForASessionThatIsNotVisitedBeforeIt() throws {
        let server = Self.server { $0.limits.idleTimeoutSeconds = 30 }
        let (id, session) = try Self.started(server)
        server.send(id, audio: SessionServiceTests.speech(4))   // an utterance in progress
        server.settle()
        let due = try Self.due(after: SystemClock.now() + 29, server, session)
        #expect(due <= SystemClock.now() + 30, "due at its idle timeout only")
        server.router.tick(now: due - 0.1)
        server.settle()
        #expect(server.connections.closeRequest(id) == nil)
        server.router.tick(now: due)
        server.settle()
        let events = server.events(id)
        #expect(SessionServiceTests.kinds(events) == ["ready", "final", "error"], "the final comes first")
        SessionServiceTests.expectFatal(server, id, "idle", close: 4010)
    }

    @Test func theStallReleaseFiresForASessionThatIsNotVisitedBeforeIt() throws {
        let server = Self.server { $0.limits.stallSeconds = 2 }
        let (id, session) = try Self.started(server)
        let before = SystemClock.now()
        server.send(id, audio: SessionServiceTests.speech(4))   // speech, and then nothing
        let sent = SystemClock.now()
        server.settle()
        #expect(server.engine.load.busy == 1, "the utterance holds a decoder")
        let due = try Self.due(after: before + 2, server, session)
        #expect(due <= sent + 2, "due at the stall only")
        server.router.tick(now: due - 0.1)
        server.settle()
        #expect(!server.events(id).contains { $0.type == "final" })
        server.router.tick(now: due)
        server.settle()
        #expect(SessionServiceTests.finals(server.events(id)).map(\.text) == ["w1 w2 w3 w4"])
        #expect(server.engine.load.busy == 0, "the decoder is back in the pool")
        #expect(server.sessions.due(session) == nil, "nothing more until audio comes")
    }

    @Test func theResumeExpiryFiresForADetachedSessionThatIsNotVisitedBeforeIt() throws {
        let server = Self.server { $0.limits.resumeSeconds = 30 }
        let (id, session) = try Self.started(server)
        server.send(id, audio: SessionServiceTests.speech(4))
        server.settle()
        let lost = SystemClock.now()
        server.router.closed(id, backlog: OutboundBacklog(written: [], unsent: [], lastOrdinal: 0))
        #expect(session.connection == nil && !session.isClosed, "detached")
        let due = try Self.due(after: lost + 30, server, session)
        #expect(due <= SystemClock.now() + 30, "due at the end of its grace period only")
        server.router.tick(now: due - 0.1)
        server.settle()
        #expect(server.sessions.count == 1 && !session.isClosed)
        server.router.tick(now: due)
        server.settle()   // the end runs on the lane; the next tick forgets the closed session
        server.settle()
        #expect(session.isClosed)
        #expect(server.sessions.count == 0, "forgotten once over, with no connection to say so")
        #expect(server.sessions.liveCount == 0)
        #expect(server.engine.recognizersAlive == 0)
    }
}
