import Dispatch
import Foundation
import Synchronization
import Testing
@testable import StenoWorkers
import StenoSystem

/// WorkerPoolTests: a lane's end (cancel, drain, close, released without close) and the pool's
/// shutdown.
extension WorkerPoolTests {
    @Test func cancelDropsPendingJobsAndRunsTheFinalJob() {
        let pool = WorkerPool(workers: 2)
        let lane = pool.makeLane(label: "cancel")
        let started = DispatchSemaphore(value: 0)
        let gate = DispatchSemaphore(value: 0)
        let finished = DispatchSemaphore(value: 0)
        let log = Log<String>()
        lane.submit {
            started.signal()
            _ = waited(gate)
            log.append("running")
        }
        for index in 0..<10 { lane.submit { log.append("pending \(index)") } }
        #expect(waited(started))
        #expect(lane.depth == 10)
        #expect(lane.close(.cancel) { log.append("final"); finished.signal() })
        #expect(lane.isCancelled)
        #expect(!lane.submit { log.append("too late") })
        gate.signal()
        #expect(waited(finished))
        #expect(log.all == ["running", "final"])
        #expect(pool.stats.droppedJobs == 10)
        #expect(pool.shutdown(.drain, timeout: .seconds(60)))
    }

    @Test func drainRunsPendingJobsThenTheFinalJob() {
        let pool = WorkerPool(workers: 2)
        let lane = pool.makeLane(label: "drain")
        let gate = DispatchSemaphore(value: 0)
        let finished = DispatchSemaphore(value: 0)
        let log = Log<String>()
        lane.submit { _ = waited(gate); log.append("first") }
        for index in 0..<10 { lane.submit { log.append("\(index)") } }
        #expect(lane.close(.drain) { log.append("final"); finished.signal() })
        #expect(!lane.isCancelled)
        #expect(!lane.submit { log.append("too late") })
        gate.signal()
        #expect(waited(finished))
        #expect(log.all == ["first"] + (0..<10).map { "\($0)" } + ["final"])
        #expect(pool.stats.droppedJobs == 0)
        #expect(pool.shutdown(.drain, timeout: .seconds(60)))
    }

    @Test func cancelAfterDrainDropsWhatIsLeftButKeepsBothFinalJobs() {
        let pool = WorkerPool(workers: 1)
        let lane = pool.makeLane(label: "twice")
        let gate = DispatchSemaphore(value: 0)
        let started = DispatchSemaphore(value: 0)
        let log = Log<String>()
        lane.submit { started.signal(); _ = waited(gate); log.append("first") }
        for index in 0..<5 { lane.submit { log.append("\(index)") } }
        #expect(waited(started))
        lane.close(.drain) { log.append("end") }
        lane.close(.cancel) { log.append("cancelled") }
        gate.signal()
        #expect(pool.shutdown(.drain, timeout: .seconds(60)))
        #expect(log.all == ["first", "end", "cancelled"])
    }

    @Test func closingAnIdleOrFinishedLaneStillRunsTheFinalJob() {
        let pool = WorkerPool(workers: 1)
        let log = Log<String>()
        let idle = pool.makeLane(label: "idle")
        let done = DispatchSemaphore(value: 0)
        idle.submit { log.append("job"); done.signal() }
        #expect(waited(done))
        idle.close { log.append("final 1"); done.signal() }
        #expect(waited(done))
        // Closing again after the lane finished: the final job runs all the same.
        #expect(idle.close(.cancel) { log.append("final 2") })
        #expect(pool.shutdown(.drain, timeout: .seconds(60)))
        #expect(log.all == ["job", "final 1", "final 2"])
    }

    @Test func shutdownDrainRunsEverythingAndJoinsTheThreads() {
        let pool = WorkerPool(workers: 2)
        let ran = Atomic<Int>(0)
        let lanes = (0..<10).map { pool.makeLane(label: "l\($0)") }
        for lane in lanes {
            for _ in 0..<20 { lane.submit { ran.add(1, ordering: .relaxed) } }
            lane.close { ran.add(1, ordering: .relaxed) }
        }
        #expect(pool.stats.liveThreads == 2)
        #expect(pool.shutdown(.drain, timeout: .seconds(120)))
        #expect(ran.load(ordering: .relaxed) == 10 * 21)
        let stats = pool.stats
        #expect(stats.liveThreads == 0)
        #expect(stats.queuedJobs == 0)
        #expect(stats.completedJobs == 10 * 21)
        #expect(stats.lanes == 0)
        // Nothing is accepted any more.
        #expect(!pool.makeLane().submit {})
        #expect(!pool.makeLane().close(.drain) {})
        // A second shutdown returns at once.
        #expect(pool.shutdown())
    }

    @Test func immediateShutdownDropsQueuedJobsAndWaitsForTheRunningOne() {
        let pool = WorkerPool(workers: 1)
        let lane = pool.makeLane(label: "stuck")
        let started = DispatchSemaphore(value: 0)
        let gate = DispatchSemaphore(value: 0)
        let log = Log<String>()
        lane.submit { started.signal(); _ = waited(gate); log.append("running") }
        for index in 0..<50 { lane.submit { log.append("\(index)") } }
        lane.close { log.append("final") }
        pool.makeLane(label: "other").submit { log.append("other") }
        #expect(waited(started))
        // The running job holds the only worker, so the threads cannot have exited yet.
        #expect(!pool.shutdown(.immediate, timeout: .milliseconds(1)))
        #expect(pool.stats.queuedJobs == 0)
        #expect(pool.stats.droppedJobs == 52)
        gate.signal()
        #expect(pool.shutdown(.immediate, timeout: .seconds(60)))
        #expect(log.all == ["running"])
        #expect(pool.stats.liveThreads == 0)
    }

    @Test func shutdownFromInsideAJobDoesNotWaitForItself() {
        let pool = WorkerPool(workers: 1)
        let result = Locked<Bool?>(nil)
        let lane = pool.makeLane()
        let gate = DispatchSemaphore(value: 0)
        // Queue both jobs before the first can start, so the second is in before the shutdown.
        lane.submit { _ = waited(gate) }
        lane.submit {
            let joined = pool.shutdown(.drain)
            result.withLock { $0 = joined }
        }
        lane.submit { result.withLock { $0 = $0.map { !$0 } } }
        gate.signal()
        // Wait from outside: the second job, queued before the shutdown, still runs.
        #expect(pool.shutdown(.drain, timeout: .seconds(60)))
        #expect(result.withLock { $0 } == true)
    }

    @Test func aLaneReleasedWithoutCloseStillRunsItsJobs() {
        let pool = WorkerPool(workers: 1)
        let ran = Atomic<Int>(0)
        do {
            let lane = pool.makeLane()
            for _ in 0..<10 { lane.submit { ran.add(1, ordering: .relaxed) } }
        }
        #expect(pool.shutdown(.drain, timeout: .seconds(60)))
        #expect(ran.load(ordering: .relaxed) == 10)
        #expect(pool.stats.lanes == 0)
    }
}
