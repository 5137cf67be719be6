// The bookkeeping under the pool's lock: a job, one lane's state (`LaneState`), the whole
// pool's (`PoolState`: ready queues, counters, what a thread does next), the queue they are
// built of (`FIFO`), and what is read without the lock (`WorkMeter`, the thread's id).

import Synchronization

#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif

struct Job: Sendable {
    let body: @Sendable () -> Void
}

enum SliceStep: Sendable {
    /// Run this job (its time goes to the lane's meter), then ask again.
    case run(Job, WorkMeter)
    /// The lane went back onto the ready queue: wake a thread.
    case yielded
    /// The lane has no work left; `exit` when the pool is stopping and this was the last.
    case finished(exit: Bool)
}

/// The bookkeeping of one lane; only touched under the pool's lock.
final class LaneState {
    /// Where its jobs' time goes.
    let meter: WorkMeter
    var jobs = FIFO<Job>()
    /// Jobs put ahead of `jobs` by `unpark`.
    var priority = FIFO<Job>()
    /// Jobs to run after `jobs`, once the lane is closed.
    var finals: [Job] = []
    var closed = false
    /// A job parked the lane: `jobs` wait until `unpark` (or a close).
    var parked = false
    /// In a ready queue or held by a thread. An unscheduled lane has no `jobs`.
    var scheduled = false
    /// The thread running one of its jobs, or 0.
    var runner: UInt = 0

    init(meter: WorkMeter) {
        self.meter = meter
    }

    /// The next job to run: an unpark's first, else (unless parked) the queued ones, then
    /// the final ones.
    var head: Job? {
        if let first = priority.first { return first }
        if parked { return nil }
        return jobs.first ?? finals.first
    }

    func popHead() -> Job? {
        if let job = priority.popFirst() { return job }
        if parked { return nil }
        if let job = jobs.popFirst() { return job }
        if finals.isEmpty { return nil }
        return finals.removeFirst()
    }
}

struct PoolState {
    var lanes: [Int: LaneState] = [:]
    var nextLaneID = 1
    /// Lanes waiting for a thread.
    var ready = FIFO<Int>()
    /// Lanes in the ready queue or held by a thread.
    var scheduledLanes = 0
    var queued = 0
    var completed = 0
    var dropped = 0
    /// Threads running a job.
    var busy = 0
    var stopping = false
    var exitSignalled = false
    var liveThreads = 0
    /// The pool's threads, by system thread id.
    var threads: Set<UInt> = []

    /// Puts an idle lane on the ready queue. The caller signals the semaphore once, after
    /// the lock.
    mutating func schedule(_ id: Int, _ lane: LaneState) {
        if !lane.scheduled {
            lane.scheduled = true
            scheduledLanes += 1
        }
        ready.append(id)
    }

    /// True once, when the pool is stopping and no lane has work left.
    mutating func takeExitSignalIfIdle() -> Bool {
        guard stopping, scheduledLanes == 0, !exitSignalled else { return false }
        exitSignalled = true
        return true
    }

    mutating func nextStep(lane id: Int, withinSlice: Bool, thread: UInt) -> SliceStep {
        guard let lane = lanes[id] else {
            // Not reachable: a scheduled lane stays registered until it finishes.
            busy -= 1
            scheduledLanes -= 1
            return .finished(exit: takeExitSignalIfIdle())
        }
        if lane.head != nil {
            if withinSlice, let job = lane.popHead() {
                queued -= 1
                lane.runner = thread
                return .run(job, lane.meter)
            }
            // End of the slice: the lane goes to the back of the queue.
            busy -= 1
            ready.append(id)
            return .yielded
        }
        busy -= 1
        lane.scheduled = false
        scheduledLanes -= 1
        // A parked lane keeps its jobs for the unpark; a closed one that is done goes.
        if lane.closed && !lane.parked { lanes[id] = nil }
        return .finished(exit: takeExitSignalIfIdle())
    }
}

/// A first-in first-out queue with amortised O(1) operations.
struct FIFO<Element> {
    private var storage: [Element?] = []
    private var headIndex = 0

    var count: Int { storage.count - headIndex }
    var isEmpty: Bool { headIndex == storage.count }
    var first: Element? { isEmpty ? nil : storage[headIndex] }

    mutating func append(_ element: Element) {
        storage.append(element)
    }

    mutating func popFirst() -> Element? {
        guard headIndex < storage.count else { return nil }
        let element = storage[headIndex]
        storage[headIndex] = nil
        headIndex += 1
        if headIndex == storage.count {
            storage.removeAll(keepingCapacity: true)
            headIndex = 0
        } else if headIndex >= 64 && headIndex * 2 >= storage.count {
            storage.removeFirst(headIndex)
            headIndex = 0
        }
        return element
    }

    /// Empties the queue and returns what it held, oldest first.
    mutating func removeAll() -> [Element] {
        let elements = storage[headIndex...].compactMap { $0 }
        storage.removeAll()
        headIndex = 0
        return elements
    }
}

/// Time taken by jobs, added to by the threads that run them and read by anyone:
/// nanosecond counters, so neither side takes a lock.
final class WorkMeter: Sendable {
    private let busyNanoseconds = Atomic<UInt64>(0)
    private let cpuNanoseconds = Atomic<UInt64>(0)

    func add(busy: Double, cpu: Double) {
        busyNanoseconds.wrappingAdd(UInt64(max(0, busy) * 1e9), ordering: .relaxed)
        cpuNanoseconds.wrappingAdd(UInt64(max(0, cpu) * 1e9), ordering: .relaxed)
    }

    var work: WorkerPool.Work {
        WorkerPool.Work(busy: Double(busyNanoseconds.load(ordering: .relaxed)) / 1e9,
                        cpu: Double(cpuNanoseconds.load(ordering: .relaxed)) / 1e9)
    }
}

func currentThreadID() -> UInt {
    #if canImport(Glibc)
    return UInt(pthread_self())
    #else
    return UInt(bitPattern: pthread_self())
    #endif
}
