// The pool itself: its counters, how it starts, and what anyone may ask
// of it (make a lane, read the stats, shut down). How its threads run the lanes is
// in WorkerPool+Threads.swift, the lanes in Lane.swift, and the bookkeeping under the
// pool's lock in WorkerPoolState.swift.

import Dispatch
import Foundation
import StenoSystem

/// Threads that run the CPU work of many sessions: Opus decoding, resampling and speech
/// recognition.
///
/// ## Lanes
/// Work is submitted to a ``Lane``; a session owns one. The jobs of one lane run one at a
/// time, in the order they were submitted, never two at once, on whichever thread is free.
/// A session's decoder and recognizer are therefore only ever touched by one thread at a
/// time and need no lock of their own (StenoSession's `PipelineLocal` makes that usable under
/// Swift 6 strict concurrency). Different lanes run in parallel, one lane per thread.
///
/// ## Fairness
/// Lanes that have work wait in a round-robin queue. A thread takes the lane at the head,
/// runs up to `sliceJobs` of its jobs (fewer if `sliceDuration` has passed since the slice
/// began), then puts the lane back at the tail if it still has work. A session streaming
/// a file faster than real time therefore cannot starve a live one: another lane's job
/// waits for at most one slice of each lane ahead of it, never for a whole backlog.
/// Running several jobs of a lane back to back keeps its recognizer's memory warm in the
/// cache; with recognition jobs of 10–60 ms of CPU the default duration bound (20 ms)
/// makes a slice one or two jobs, while a lane of tiny jobs gets up to `sliceJobs`.
///
/// ## Threads
/// `workers` threads (default: one per core) run every lane's jobs. Slow one-off work
/// (making a recognizer's decoders) runs elsewhere: `StenoServer.start` has the engine make
/// them in the background, ahead of speech.
///
/// ## Parking
/// A job that finds it cannot go on (say, its session waits for a shared recognizer) calls
/// ``Lane/park()``: once it returns, the lane's later jobs wait, in order, without holding a
/// thread. ``Lane/unpark(first:)``, from any thread, puts a job at the head of the lane and
/// lets it run again. An unpark that comes before the park it answers is not lost: the park
/// then does nothing. Closing a lane unparks it (its final job always runs).
///
/// ## What the pool never does
/// Submitting never blocks on a job: it takes a short lock and returns. How much may be
/// queued is not bounded here; a session bounds it upstream with its audio budget.
/// Jobs cannot throw. A job that traps (a failed precondition, an out-of-range index, a
/// force-unwrapped nil) crashes the whole process, as anywhere in Swift: the pool cannot
/// catch it. The server's policy is that a crash on any input is a bug to be fixed, so jobs
/// must turn bad input into errors themselves. A job that never returns holds its thread
/// (and its lane) forever.
///
/// ## Lifetime and shutdown
/// The threads keep the pool alive until ``shutdown(_:timeout:)``. Once a shutdown has
/// begun nothing new is accepted, final jobs of lanes closed later included, so a server
/// stops in this order: close every session's lane with its final job (finalize, send
/// `ended`), then `shutdown(.drain, timeout: drainTimeout)` to let that work finish, and
/// if it returns false, `shutdown(.immediate)` to drop what is left and join the threads.
public final class WorkerPool: Sendable {
    /// What closing a lane does with the jobs that have not started yet.
    public enum CloseMode: Sendable, Hashable {
        /// Run them all, then the final job.
        case drain
        /// Drop them (a running job still finishes), then run the final job.
        case cancel
    }

    /// What ``WorkerPool/shutdown(_:timeout:)`` does with queued jobs.
    public enum ShutdownMode: Sendable, Hashable {
        /// Run every job already queued, final jobs included, then stop the threads.
        case drain
        /// Drop every job not yet started, final jobs included; running jobs still finish.
        case immediate
    }

    /// A consistent snapshot of the pool's counters, for metrics and health reports.
    public struct Stats: Sendable, Hashable {
        /// Worker threads.
        public var workers: Int
        /// Worker threads running a job at the moment.
        public var busyWorkers: Int
        /// Jobs waiting to start, in all lanes, final jobs included.
        public var queuedJobs: Int
        /// Jobs that have run to the end since the pool started.
        public var completedJobs: Int
        /// Jobs dropped by cancelled lanes and by an immediate shutdown.
        public var droppedJobs: Int
        /// Lanes not finished yet (open, or closed with work left).
        public var lanes: Int
        /// Threads that have not exited yet.
        public var liveThreads: Int
        /// What the jobs have taken since the pool started (``Work``).
        public var work: Work
    }

    /// Time spent running jobs: a lane's (``Lane/work``) or the whole pool's.
    ///
    /// `busy` is wall-clock time from a job's start to its end, `cpu` the CPU time its thread
    /// used meanwhile. They differ when the thread waited for a core (other processes, or more
    /// runnable threads than cores): `busy` is what the workers' capacity is spent in, so it
    /// is what admission counts, and a machine shared with other work shows up as dearer jobs.
    public struct Work: Sendable, Hashable {
        /// Seconds of wall-clock time inside jobs.
        public var busy: Double
        /// Seconds of thread CPU time inside jobs.
        public var cpu: Double

        public init(busy: Double = 0, cpu: Double = 0) {
            self.busy = busy
            self.cpu = cpu
        }
    }

    /// The default number of worker threads: the number of active cores.
    public static var defaultWorkerCount: Int {
        max(1, ProcessInfo.processInfo.activeProcessorCount)
    }

    /// Worker threads.
    public let workerCount: Int
    /// A lane gives up its thread after this many jobs in a row.
    public let sliceJobs: Int
    /// … or once a job ends this long after its slice began.
    public let sliceDuration: Duration

    let state = Locked(PoolState())
    /// The jobs' time, all lanes together (read without the pool's lock).
    let meter = WorkMeter()
    /// One signal per lane put on the ready queue (and per thread told to exit).
    let ready = DispatchSemaphore(value: 0)
    let threadsExited = DispatchGroup()

    /// Starts the threads.
    ///
    /// - Parameters:
    ///   - workers: threads; values below 1 mean 1.
    ///   - sliceJobs: the most jobs a lane runs before it yields its thread (at least 1).
    ///   - sliceDuration: a lane yields once this much time has passed in its slice.
    ///   - name: prefix of the thread names, as shown by `top -H` or a debugger.
    public convenience init(
        workers: Int = WorkerPool.defaultWorkerCount,
        sliceJobs: Int = 8,
        sliceDuration: Duration = .milliseconds(20),
        name: String = "steno"
    ) {
        self.init(workers: max(1, workers), sliceJobs: sliceJobs, sliceDuration: sliceDuration, name: name, threads: true)
    }

    private init(workers workerCount: Int, sliceJobs: Int, sliceDuration: Duration, name: String, threads: Bool) {
        self.workerCount = threads ? workerCount : 0
        self.sliceJobs = max(1, sliceJobs)
        self.sliceDuration = sliceDuration
        guard threads else { return }
        state.withLock { $0.liveThreads = workerCount }
        for index in 0..<workerCount {
            startThread(name: "\(name)-worker-\(index)")
        }
    }

    /// A pool with no threads of its own: jobs run only when ``runPending()`` is called, on
    /// the calling thread, in the order the threads would take them. For tests of what runs
    /// on lanes that must not depend on timing.
    public static func manual(sliceJobs: Int = 8) -> WorkerPool {
        WorkerPool(workers: 0, sliceJobs: sliceJobs, sliceDuration: .seconds(3600), name: "manual", threads: false)
    }

    /// A manual pool (``manual(sliceJobs:)``) runs its ready jobs on the
    /// calling thread until none is ready (jobs that submit jobs have those run too). Returns
    /// how many ran. On a pool with threads it does nothing.
    @discardableResult
    public func runPending() -> Int {
        guard workerCount == 0 else { return 0 }
        let me = currentThreadID()
        var ran = 0
        while true {
            let picked: Int? = state.withLock { s in
                guard let id = s.ready.popFirst() else { return nil }
                s.busy += 1
                return id
            }
            guard let id = picked else { return ran }
            ran += runSlice(lane: id, thread: me)
        }
    }

    // MARK: Public operations

    /// A new lane. Keep it for the session's life and close it at the end; a lane that is
    /// released without ``Lane/close(_:then:)`` is closed with `.drain`.
    public func makeLane(label: String = "") -> Lane {
        // One meter for the lane's life: its `LaneState` may be dropped and made again
        // (a final job after the lane finished), its time is still the lane's.
        let meter = WorkMeter()
        let id = state.withLock { s in
            let id = s.nextLaneID
            s.nextLaneID += 1
            s.lanes[id] = LaneState(meter: meter)
            return id
        }
        return Lane(pool: self, id: id, label: label, meter: meter)
    }

    /// A consistent snapshot of the counters (takes the pool's lock briefly).
    public var stats: Stats {
        state.withLock { s in
            Stats(
                workers: workerCount, busyWorkers: s.busy,
                queuedJobs: s.queued, completedJobs: s.completed, droppedJobs: s.dropped,
                lanes: s.lanes.count, liveThreads: s.liveThreads, work: meter.work)
        }
    }

    /// Stops the pool. From then on nothing new is accepted: `submit` and the final job of
    /// a later `close` are refused (they return false).
    ///
    /// With `.drain`, every job already queued still runs, final jobs included, and the
    /// threads exit when there is nothing left. With `.immediate`, jobs not yet started are
    /// dropped (final jobs too); jobs already running finish, since a thread cannot be
    /// interrupted. Dropped closures are released, so what they captured is freed.
    ///
    /// Blocks until every thread has exited, or until `timeout` (nil waits for ever).
    /// Returns true when all threads have exited. Called from one of the pool's own threads
    /// (from inside a job) it only starts the shutdown and returns false at once.
    /// Calling it again is allowed; `.immediate` after `.drain` drops what is still queued.
    @discardableResult
    public func shutdown(_ mode: ShutdownMode = .drain, timeout: Duration? = nil) -> Bool {
        let me = currentThreadID()
        let (dropped, exitNow, insidePool): ([Job], Bool, Bool) = state.withLock { s in
            s.stopping = true
            var dropped: [Job] = []
            if mode == .immediate {
                for lane in s.lanes.values {
                    dropped += lane.priority.removeAll() + lane.jobs.removeAll()
                    dropped += lane.finals
                    lane.finals.removeAll()
                }
                s.queued -= dropped.count
                s.dropped += dropped.count
                // Lanes that are not scheduled have nothing left to run and never will.
                s.lanes = s.lanes.filter { $0.value.scheduled }
            }
            return (dropped, s.takeExitSignalIfIdle(), s.threads.contains(me))
        }
        // `dropped` is released here, after the lock: the closures' captures may run
        // deinitializers that call back into the pool.
        _ = dropped
        if exitNow { signalExit() }
        if insidePool { return false }
        if let timeout {
            let nanoseconds = max(0, timeout.nanoseconds)
            return threadsExited.wait(timeout: .now() + .nanoseconds(nanoseconds)) == .success
        }
        threadsExited.wait()
        return true
    }
}

extension Duration {
    fileprivate var nanoseconds: Int {
        let (seconds, attoseconds) = components
        let total = Double(seconds) * 1e9 + Double(attoseconds) / 1e9
        if total >= Double(Int.max) { return Int.max }
        return Int(total)
    }
}
