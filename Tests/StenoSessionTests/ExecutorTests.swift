import Foundation
import StenoSession
import StenoSystem
import StenoWorkers
import Testing

/// Where a session's jobs run: in order on a worker lane or inline, and its pipeline reachable
/// only from them.
@Suite struct ExecutorTests {
    /// Queues 100 jobs that each add their number to a value only the jobs may touch, and reads
    /// it from the last one.
    static func hundredJobs(on executor: any PipelineExecutor, done: @escaping @Sendable ([Int]) -> Void) -> Locked<Int> {
        let state = PipelineLocal([Int](), executor: executor)
        let current = Locked(0)
        for index in 0..<100 {
            executor.enqueue {
                if executor.isCurrent { current.withLock { $0 += 1 } }
                state.withValue { $0.append(index) }
            }
        }
        executor.finish(cancelling: false) { state.withValue { done($0) } }
        return current
    }

    @Test func aLanesJobsRunInOrderAndAloneReachItsValue() {
        let pool = WorkerPool(workers: 2)
        let lane = pool.makeLane()
        let result = Locked<[Int]>([])
        #expect(!lane.isCurrent)
        let current = Self.hundredJobs(on: lane) { values in result.withLock { $0 = values } }
        #expect(pool.shutdown(.drain, timeout: .seconds(60)))
        #expect(current.withLock { $0 } == 100)
        #expect(result.withLock { $0 } == Array(0..<100))
    }

    @Test func inlineJobsRunInOrderInTheCallersThread() {
        let executor = InlineExecutor()
        let result = Locked<[Int]>([])
        let current = Self.hundredJobs(on: executor) { values in result.withLock { $0 = values } }
        #expect(executor.queuedCount == 101)
        executor.runUntilIdle()
        #expect(!executor.isCurrent)
        #expect(current.withLock { $0 } == 100)
        #expect(result.withLock { $0 } == Array(0..<100))
        #expect(!executor.enqueue {})
    }

    @Test func aPausedInlineExecutorWaitsForItsResumeFromAnotherThread() {
        let executor = InlineExecutor()
        let order = Locked<[String]>([])
        executor.enqueue {
            order.withLock { $0.append("waits") }
            executor.pause()
            Thread.detachNewThread {
                Thread.sleep(forTimeInterval: 0.05)
                executor.resume { order.withLock { $0.append("resumed") } }
            }
        }
        executor.enqueue { order.withLock { $0.append("after") } }
        executor.runUntilIdle()
        #expect(order.withLock { $0 } == ["waits", "resumed", "after"])
    }
}
