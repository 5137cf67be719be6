import Dispatch
import Foundation
import Synchronization
import Testing
@testable import StenoWorkers
import StenoSystem

/// Waits long enough that only a hang (a bug) can fail it; never a timing assertion.
func waited(_ semaphore: DispatchSemaphore, seconds: Int = 60) -> Bool {
    semaphore.wait(timeout: .now() + .seconds(seconds)) == .success
}

/// A list that jobs on any thread append to.
final class Log<Element: Sendable>: Sendable {
    private let items = Locked<[Element]>([])
    func append(_ item: Element) { items.withLock { $0.append(item) } }
    var all: [Element] { items.withLock { $0 } }
}

private final class AtomicCounter: Sendable {
    let value = Atomic<Int>(0)
}

/// The pool's lanes: order, no overlap, fair slices; stats, compute time, stress.
/// Closing lanes and shutting down are in WorkerPoolClosingTests.swift, parking in
/// WorkerPoolParkingTests.swift; `waited` and `Log` above serve them too.
///
/// The pools of these tests block worker threads on purpose; running the tests one at a
/// time keeps a 2-core machine responsive for the rest of the test process.
@Suite(.serialized) struct WorkerPoolTests {
    @Test func jobsOfOneLaneRunInSubmissionOrder() {
        let pool = WorkerPool(workers: 2)
        let lane = pool.makeLane(label: "order")
        let log = Log<Int>()
        for index in 0..<500 {
            #expect(lane.submit { log.append(index) })
        }
        #expect(pool.shutdown(.drain, timeout: .seconds(120)))
        #expect(log.all == Array(0..<500))
    }

    @Test func jobsOfOneLaneNeverOverlap() {
        let pool = WorkerPool(workers: 4, sliceJobs: 1)
        let overlaps = Atomic<Int>(0)
        let ran = Atomic<Int>(0)
        let lanes = (0..<3).map { pool.makeLane(label: "lane\($0)") }
        let inFlight = lanes.map { _ in AtomicCounter() }
        // Submit from several threads at once, round-robin over the lanes.
        DispatchQueue.concurrentPerform(iterations: 3) { lane in
            for _ in 0..<300 {
                lanes[lane].submit {
                    if inFlight[lane].value.add(1, ordering: .sequentiallyConsistent).newValue != 1 {
                        overlaps.add(1, ordering: .relaxed)
                    }
                    // Give another thread every chance to enter the lane too.
                    for _ in 0..<50 { sched_yield() }
                    inFlight[lane].value.subtract(1, ordering: .sequentiallyConsistent)
                    ran.add(1, ordering: .relaxed)
                }
            }
        }
        #expect(pool.shutdown(.drain, timeout: .seconds(120)))
        #expect(ran.load(ordering: .relaxed) == 900)
        #expect(overlaps.load(ordering: .relaxed) == 0)
    }

    @Test func twoLanesRunAtTheSameTimeOnTwoWorkers() {
        let pool = WorkerPool(workers: 2)
        let aArrived = DispatchSemaphore(value: 0)
        let bArrived = DispatchSemaphore(value: 0)
        let met = Atomic<Int>(0)
        // Each job waits for the other to arrive: this only succeeds if both run at once.
        pool.makeLane(label: "a").submit {
            aArrived.signal()
            if waited(bArrived, seconds: 30) { met.add(1, ordering: .relaxed) }
        }
        pool.makeLane(label: "b").submit {
            bArrived.signal()
            if waited(aArrived, seconds: 30) { met.add(1, ordering: .relaxed) }
        }
        #expect(pool.shutdown(.drain, timeout: .seconds(120)))
        #expect(met.load(ordering: .relaxed) == 2)
    }

    /// One worker, held by a gate while lane A queues 1000 jobs and lane B queues one.
    /// Returns the order in which they completed.
    private func raceOneJobAgainstABacklog(sliceJobs: Int, sliceDuration: Duration) -> [String] {
        let pool = WorkerPool(workers: 1, sliceJobs: sliceJobs, sliceDuration: sliceDuration)
        let gate = DispatchSemaphore(value: 0)
        let log = Log<String>()
        let gateLane = pool.makeLane(label: "gate")
        gateLane.submit { _ = waited(gate) }
        let busy = pool.makeLane(label: "busy")
        for _ in 0..<1000 { busy.submit { log.append("a") } }
        let quiet = pool.makeLane(label: "quiet")
        quiet.submit { log.append("b") }
        gate.signal()
        #expect(pool.shutdown(.drain, timeout: .seconds(120)))
        return log.all
    }

    @Test func aLaneWithABacklogYieldsAfterOneSlice() {
        let order = raceOneJobAgainstABacklog(sliceJobs: 4, sliceDuration: .seconds(3600))
        #expect(order.count == 1001)
        // Round robin: A runs one slice of 4 jobs, then B's single job, then A again.
        #expect(order.firstIndex(of: "b") == 4)
    }

    @Test func theSliceAlsoEndsWhenItsTimeIsUp() {
        // A zero duration ends every slice after its first job.
        let order = raceOneJobAgainstABacklog(sliceJobs: 1000, sliceDuration: .zero)
        #expect(order.count == 1001)
        #expect(order.firstIndex(of: "b") == 1)
    }

    @Test func aSingleJobOvertakesABacklogWithDefaultSettings() {
        let pool = WorkerPool(workers: 2)
        let log = Log<String>()
        let busy = pool.makeLane(label: "busy")
        for _ in 0..<1000 {
            busy.submit {
                log.append("a")
                for _ in 0..<20 { sched_yield() }
            }
        }
        pool.makeLane(label: "quiet").submit { log.append("b") }
        #expect(pool.shutdown(.drain, timeout: .seconds(120)))
        let order = log.all
        #expect(order.count == 1001)
        #expect(order.last == "a")
    }

    @Test func statsCountQueuedBusyAndCompletedJobs() {
        let pool = WorkerPool(workers: 2)
        let lane = pool.makeLane()
        let started = DispatchSemaphore(value: 0)
        let gate = DispatchSemaphore(value: 0)
        lane.submit { started.signal(); _ = waited(gate) }
        for _ in 0..<7 { lane.submit {} }
        #expect(waited(started))
        var stats = pool.stats
        #expect(stats.workers == 2)
        #expect(stats.busyWorkers == 1)
        #expect(stats.queuedJobs == 7)
        #expect(lane.depth == 7)
        #expect(stats.lanes == 1)
        gate.signal()
        #expect(pool.shutdown(.drain, timeout: .seconds(60)))
        stats = pool.stats
        #expect(stats.busyWorkers == 0)
        #expect(stats.queuedJobs == 0)
        #expect(stats.completedJobs == 8)
        #expect(lane.depth == 0)
    }

    @Test func stressManyLanesFromManyThreads() {
        let pool = WorkerPool(workers: 3, sliceJobs: 3)
        let laneCount = 200
        let jobsPerLane = 50
        let correct = Atomic<Int>(0)
        let finals = Atomic<Int>(0)
        let allDone = DispatchSemaphore(value: 0)
        DispatchQueue.concurrentPerform(iterations: laneCount) { index in
            let lane = pool.makeLane(label: "s\(index)")
            let seen = Locked([Int]())
            for job in 0..<jobsPerLane {
                lane.submit { seen.withLock { $0.append(job) } }
            }
            // Some sessions are cancelled; they must still run their final job.
            let cancel = index % 7 == 0
            lane.close(cancel ? .cancel : .drain) {
                seen.withLock { values in
                    let inOrder = values == Array(0..<values.count)
                    let complete = cancel || values.count == jobsPerLane
                    if inOrder && complete { correct.add(1, ordering: .relaxed) }
                }
                if finals.add(1, ordering: .relaxed).newValue == laneCount { allDone.signal() }
            }
        }
        #expect(waited(allDone, seconds: 300))
        #expect(correct.load(ordering: .relaxed) == laneCount)
        #expect(pool.shutdown(.drain, timeout: .seconds(60)))
        let stats = pool.stats
        #expect(stats.lanes == 0)
        #expect(stats.queuedJobs == 0)
        #expect(stats.busyWorkers == 0)
    }

    /// Each lane's jobs' time, and the pool's (what admission counts): a job's wall time is at
    /// least what it slept, its CPU time no more than its wall time.
    @Test func lanesCountTheirComputeJobsTime() {
        let pool = WorkerPool.manual()
        let sleeper = pool.makeLane(label: "sleeper")
        let idle = pool.makeLane(label: "idle")
        sleeper.submit { usleep(20_000) }
        sleeper.submit { usleep(20_000) }
        pool.runPending()
        let work = sleeper.work
        #expect(work.busy >= 0.04, "\(work)")
        #expect(work.cpu <= work.busy + 0.001, "\(work)")
        #expect(idle.work == WorkerPool.Work())
        #expect(pool.stats.work == work)
        // Its time stays the lane's after it has closed and its final job has run.
        sleeper.close { usleep(10_000) }
        pool.runPending()
        #expect(sleeper.work.busy >= work.busy + 0.01)
        #expect(pool.stats.work == sleeper.work)
    }

    /// Compute done for a lane elsewhere (an engine's worker process) is the lane's work too,
    /// not the pool's threads'.
    @Test func aLaneChargedForWorkElsewhereCountsIt() {
        let pool = WorkerPool.manual()
        let lane = pool.makeLane(label: "whisper")
        lane.charge(busy: 0.25)
        lane.charge(busy: 0.5)
        #expect(abs(lane.work.busy - 0.75) < 1e-6 && abs(lane.work.cpu - 0.75) < 1e-6, "\(lane.work)")
        #expect(pool.stats.work == WorkerPool.Work())
    }
}
