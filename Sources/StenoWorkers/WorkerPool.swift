import Dispatch
import Foundation
import StenoSystem
import Synchronization

#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif

/// Threads that run the CPU work of many sessions: Opus decoding, resampling and speech
/// recognition, and the slow one-off preparation of a session (creating a recognizer).
///
/// ## Lanes
/// Work is submitted to a ``Lane``; a session owns one. The jobs of one lane run one at a
/// time, in the order they were submitted, never two at once, on whichever thread is free.
/// A session's decoder and recognizer are therefore only ever touched by one thread at a
/// time and need no lock of their own (``LaneLocal`` makes that usable under Swift 6 strict
/// concurrency). Different lanes run in parallel, one lane per thread.
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
/// ## Two kinds of threads
/// `workers` threads (default: one per core) run ``JobKind/compute`` jobs. A separate,
/// small set of `preparers` threads (default: half the workers, at least one) runs
/// ``JobKind/preparation`` jobs: blocking one-off work such as creating a recognizer
/// (≈0.5 s). A session submits its preparation as the first job of its own lane, with
/// `kind: .preparation`; the lane's later compute jobs wait behind it as usual, and no
/// recognition worker is held for half a second while sessions start. Work that belongs
/// to no session goes through ``prepare(_:)``.
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
    /// Which threads run a job.
    public enum JobKind: Sendable, Hashable, CaseIterable {
        /// Short CPU work (decode, resample, recognize a chunk): the worker threads.
        case compute
        /// Blocking one-off work (load a model, create a recognizer): the preparer threads.
        case preparation
    }

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
        /// Worker threads (compute jobs).
        public var workers: Int
        /// Preparer threads (preparation jobs).
        public var preparers: Int
        /// Worker threads running a job at the moment.
        public var busyWorkers: Int
        /// Preparer threads running a job at the moment.
        public var busyPreparers: Int
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
        /// What the compute jobs have taken since the pool started (``Work``).
        public var work: Work
    }

    /// Time spent running compute jobs: a lane's (``Lane/work``) or the whole pool's.
    ///
    /// `busy` is wall-clock time from a job's start to its end, `cpu` the CPU time its thread
    /// used meanwhile. They differ when the thread waited for a core (other processes, or more
    /// runnable threads than cores): `busy` is what the workers' capacity is spent in, so it
    /// is what admission counts, and a machine shared with other work shows up as dearer jobs.
    /// Preparation jobs are not counted: they run on threads of their own.
    public struct Work: Sendable, Hashable {
        /// Seconds of wall-clock time inside compute jobs.
        public var busy: Double
        /// Seconds of thread CPU time inside compute jobs.
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

    /// Worker threads (compute jobs).
    public let workerCount: Int
    /// Preparer threads (preparation jobs).
    public let preparerCount: Int
    /// A lane gives up its thread after this many jobs in a row.
    public let sliceJobs: Int
    /// … or once a job ends this long after its slice began.
    public let sliceDuration: Duration

    private let state = Locked(PoolState())
    /// The compute jobs' time, all lanes together (read without the pool's lock).
    private let meter = WorkMeter()
    private let computeReady = DispatchSemaphore(value: 0)
    private let preparationReady = DispatchSemaphore(value: 0)
    private let threadsExited = DispatchGroup()

    /// Starts the threads.
    ///
    /// - Parameters:
    ///   - workers: compute threads; values below 1 mean 1.
    ///   - preparers: preparation threads; nil means half the workers, at least 1.
    ///   - sliceJobs: the most jobs a lane runs before it yields its thread (at least 1).
    ///   - sliceDuration: a lane yields once this much time has passed in its slice.
    ///   - name: prefix of the thread names, as shown by `top -H` or a debugger.
    public convenience init(
        workers: Int = WorkerPool.defaultWorkerCount,
        preparers: Int? = nil,
        sliceJobs: Int = 8,
        sliceDuration: Duration = .milliseconds(20),
        name: String = "steno"
    ) {
        self.init(workers: max(1, workers), preparers: max(1, preparers ?? (max(1, workers) / 2)),
                  sliceJobs: sliceJobs, sliceDuration: sliceDuration, name: name, threads: true)
    }

    private init(workers workerCount: Int, preparers preparerCount: Int, sliceJobs: Int, sliceDuration: Duration,
                 name: String, threads: Bool) {
        self.workerCount = threads ? workerCount : 0
        self.preparerCount = threads ? preparerCount : 0
        self.sliceJobs = max(1, sliceJobs)
        self.sliceDuration = sliceDuration
        guard threads else { return }
        state.withLock { $0.liveThreads = workerCount + preparerCount }
        for index in 0..<workerCount {
            startThread(kind: .compute, name: "\(name)-worker-\(index)")
        }
        for index in 0..<preparerCount {
            startThread(kind: .preparation, name: "\(name)-prepare-\(index)")
        }
    }

    /// A pool with no threads of its own: jobs run only when ``runPending()`` is called, on
    /// the calling thread, in the order the threads would take them. For tests of what runs
    /// on lanes that must not depend on timing.
    public static func manual(sliceJobs: Int = 8) -> WorkerPool {
        WorkerPool(workers: 0, preparers: 0, sliceJobs: sliceJobs, sliceDuration: .seconds(3600), name: "manual",
                   threads: false)
    }

    /// A manual pool (``manual(sliceJobs:)``) runs its ready jobs, of both kinds, on the
    /// calling thread until none is ready (jobs that submit jobs have those run too). Returns
    /// how many ran. On a pool with threads it does nothing.
    @discardableResult
    public func runPending() -> Int {
        guard workerCount == 0 else { return 0 }
        let me = currentThreadID()
        var ran = 0
        while true {
            let picked: (Int, JobKind)? = state.withLock { s in
                for kind in JobKind.allCases {
                    if let id = s[ready: kind].popFirst() {
                        s.busy(kind, +1)
                        return (id, kind)
                    }
                }
                return nil
            }
            guard let (id, kind) = picked else { return ran }
            ran += runSlice(lane: id, kind: kind, thread: me)
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

    /// Runs a one-off blocking job on a preparer thread, in no lane: it may run at the same
    /// time as other preparation jobs. Returns false (and never runs `job`) once the pool is
    /// shutting down.
    @discardableResult
    public func prepare(_ job: @escaping @Sendable () -> Void) -> Bool {
        let signal: JobKind? = state.withLock { s in
            if s.stopping { return nil }
            let id = s.nextLaneID
            s.nextLaneID += 1
            let lane = LaneState(meter: nil)
            lane.closed = true
            lane.jobs.append(Job(kind: .preparation, body: job))
            s.queued += 1
            s.lanes[id] = lane
            s.schedule(id, lane, kind: .preparation)
            return .preparation
        }
        guard let signal else { return false }
        wake(signal)
        return true
    }

    /// Runs `work` on a preparer thread and returns its result to an async caller.
    /// Throws ``WorkerPoolError/shutDown`` if the pool no longer accepts work.
    public func prepare<T: Sendable>(
        _ work: @escaping @Sendable () throws -> T
    ) async throws -> T {
        try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<T, any Error>) in
            let accepted = prepare {
                continuation.resume(with: Result { try work() })
            }
            if !accepted { continuation.resume(throwing: WorkerPoolError.shutDown) }
        }
    }

    /// A consistent snapshot of the counters (takes the pool's lock briefly).
    public var stats: Stats {
        state.withLock { s in
            Stats(
                workers: workerCount, preparers: preparerCount,
                busyWorkers: s.busyCompute, busyPreparers: s.busyPreparation,
                queuedJobs: s.queued, completedJobs: s.completed, droppedJobs: s.dropped,
                lanes: s.lanes.count, liveThreads: s.liveThreads, work: meter.work)
        }
    }

    /// Which kind of job the calling thread runs: nil when it is not one of this pool's
    /// threads. Meant for assertions such as "never on the lws thread".
    public var currentThreadKind: JobKind? {
        let me = currentThreadID()
        return state.withLock { $0.threads[me] }
    }

    /// Stops the pool. From then on nothing new is accepted: `submit`, `prepare` and the
    /// final job of a later `close` are refused (they return false).
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
            return (dropped, s.takeExitSignalIfIdle(), s.threads[me] != nil)
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

    // MARK: Lane operations (called by Lane)

    fileprivate func submit(lane id: Int, job: Job) -> Bool {
        let result: SubmitResult = state.withLock { s in
            guard !s.stopping, let lane = s.lanes[id], !lane.closed else { return .refused }
            lane.jobs.append(job)
            s.queued += 1
            if lane.scheduled || lane.parked { return .queued }
            s.schedule(id, lane, kind: job.kind)
            return .scheduled(job.kind)
        }
        switch result {
        case .refused: return false
        case .queued: return true
        case .scheduled(let kind):
            wake(kind)
            return true
        }
    }

    fileprivate func close(lane id: Int, meter: WorkMeter, mode: CloseMode, final: Job?) -> Bool {
        let (accepted, dropped, signal): (Bool, [Job], JobKind?) = state.withLock { s in
            let lane: LaneState
            if let existing = s.lanes[id] {
                lane = existing
            } else {
                // The lane has already finished: only a final job is left to run.
                guard final != nil, !s.stopping else { return (final == nil, [], nil) }
                lane = LaneState(meter: meter)
                s.lanes[id] = lane
            }
            lane.closed = true
            lane.parked = false
            var dropped: [Job] = []
            if mode == .cancel {
                dropped = lane.priority.removeAll() + lane.jobs.removeAll()
                s.queued -= dropped.count
                s.dropped += dropped.count
            }
            var accepted = true
            if let final {
                if s.stopping {
                    accepted = false
                } else {
                    lane.finals.append(final)
                    s.queued += 1
                }
            }
            if lane.scheduled { return (accepted, dropped, nil) }
            // An idle lane has no jobs; only its final jobs can be left.
            if let head = lane.finals.first {
                s.schedule(id, lane, kind: head.kind)
                return (accepted, dropped, head.kind)
            }
            s.lanes[id] = nil
            return (accepted, dropped, nil)
        }
        _ = dropped  // released after the lock, see shutdown
        if let signal { wake(signal) }
        return accepted
    }

    fileprivate func depth(lane id: Int) -> Int {
        state.withLock { s in
            guard let lane = s.lanes[id] else { return 0 }
            return lane.priority.count + lane.jobs.count + lane.finals.count
        }
    }

    fileprivate func park(lane id: Int) {
        state.withLock { s in
            guard let lane = s.lanes[id], !lane.closed else { return }
            // An unpark that already came (its job waits at the head) wins.
            if lane.priority.isEmpty { lane.parked = true }
        }
    }

    fileprivate func unpark(lane id: Int, first job: Job) -> Bool {
        let result: SubmitResult = state.withLock { s in
            guard !s.stopping, let lane = s.lanes[id] else { return .refused }
            lane.parked = false
            lane.priority.append(job)
            s.queued += 1
            if lane.scheduled { return .queued }
            s.schedule(id, lane, kind: job.kind)
            return .scheduled(job.kind)
        }
        switch result {
        case .refused: return false
        case .queued: return true
        case .scheduled(let kind):
            wake(kind)
            return true
        }
    }

    fileprivate func isParked(lane id: Int) -> Bool {
        state.withLock { $0.lanes[id]?.parked ?? false }
    }

    fileprivate func isRunningOnCurrentThread(lane id: Int) -> Bool {
        let me = currentThreadID()
        return state.withLock { $0.lanes[id]?.runner == me }
    }

    // MARK: Threads

    private func startThread(kind: JobKind, name: String) {
        threadsExited.enter()
        let thread = Thread { [self] in
            // Set from inside (see `nameCurrentThread`).
            nameCurrentThread(name)
            self.threadMain(kind: kind)
        }
        thread.start()
    }

    private func threadMain(kind: JobKind) {
        let me = currentThreadID()
        state.withLock { $0.threads[me] = kind }
        let ready = semaphore(kind)
        while true {
            ready.wait()
            // Every push onto a ready queue is paired with one signal, so a signal finds
            // a lane, except the exit signals, which are sent only when no lane is left.
            let picked: Int? = state.withLock { s in
                guard let id = s[ready: kind].popFirst() else { return nil }
                s.busy(kind, +1)
                return id
            }
            guard let id = picked else { break }
            runSlice(lane: id, kind: kind, thread: me)
        }
        state.withLock { s in
            s.threads[me] = nil
            s.liveThreads -= 1
        }
        threadsExited.leave()
    }

    /// Runs jobs of one lane until its slice is used up, it has nothing left, or its next
    /// job is for the other kind of thread.
    @discardableResult
    private func runSlice(lane id: Int, kind: JobKind, thread me: UInt) -> Int {
        let clock = ContinuousClock()
        let began = clock.now
        var ran = 0
        while true {
            let withinSlice = ran < sliceJobs && (ran == 0 || began.duration(to: clock.now) < sliceDuration)
            let step: SliceStep = state.withLock { s in
                if ran > 0 {
                    s.completed += 1
                    s.lanes[id]?.runner = 0
                }
                return s.nextStep(lane: id, kind: kind, withinSlice: withinSlice, thread: me)
            }
            switch step {
            case .run(let job, let laneMeter):
                guard job.kind == .compute else {
                    job.body()
                    ran += 1
                    continue
                }
                let startedAt = clock.now
                let cpuBefore = threadCPUSeconds()
                job.body()
                let busy = Self.seconds(startedAt.duration(to: clock.now))
                let cpu = max(0, threadCPUSeconds() - cpuBefore)
                laneMeter?.add(busy: busy, cpu: cpu)
                meter.add(busy: busy, cpu: cpu)
                ran += 1
            case .yielded(let kind):
                wake(kind)
                return ran
            case .finished(let exit):
                if exit { signalExit() }
                return ran
            }
        }
    }

    private static func seconds(_ duration: Duration) -> Double {
        let (seconds, attoseconds) = duration.components
        return Double(seconds) + Double(attoseconds) / 1e18
    }

    private func semaphore(_ kind: JobKind) -> DispatchSemaphore {
        switch kind {
        case .compute: return computeReady
        case .preparation: return preparationReady
        }
    }

    private func wake(_ kind: JobKind) {
        semaphore(kind).signal()
    }

    /// One signal per thread: each finds the ready queues empty and exits.
    private func signalExit() {
        for _ in 0..<workerCount { computeReady.signal() }
        for _ in 0..<preparerCount { preparationReady.signal() }
    }
}

/// Errors of ``WorkerPool``'s async interface.
public enum WorkerPoolError: Error, Sendable, Hashable {
    /// The pool is shutting down and accepts no more work.
    case shutDown
}

/// A serial queue of jobs inside a ``WorkerPool``: one per session.
///
/// Jobs run one at a time in submission order, on any of the pool's threads, and each job
/// sees everything the previous job of the lane did (the pool's lock orders them).
/// All methods may be called from any thread and never wait for a job.
public final class Lane: Sendable {
    /// The pool that runs this lane's jobs.
    public let pool: WorkerPool
    /// A name for logs.
    public let label: String
    fileprivate let id: Int
    private let cancelled = Atomic<Bool>(false)
    /// The time its compute jobs have taken.
    fileprivate let meter: WorkMeter

    fileprivate init(pool: WorkerPool, id: Int, label: String, meter: WorkMeter) {
        self.pool = pool
        self.id = id
        self.label = label
        self.meter = meter
    }

    deinit {
        _ = pool.close(lane: id, meter: meter, mode: .drain, final: nil)
    }

    /// Queues a job behind the lane's other jobs. Returns false, and never runs the job,
    /// when the lane is closed or the pool is shutting down.
    ///
    /// `kind: .preparation` runs the job on a preparer thread instead of a worker (for
    /// blocking setup such as creating the session's recognizer); it still runs in order
    /// with the lane's other jobs.
    @discardableResult
    public func submit(
        kind: WorkerPool.JobKind = .compute,
        _ job: @escaping @Sendable () -> Void
    ) -> Bool {
        pool.submit(lane: id, job: Job(kind: kind, body: job))
    }

    /// Closes the lane: later `submit` calls are refused.
    ///
    /// `.drain` lets the queued jobs run; `.cancel` drops the ones that have not started
    /// (a running job finishes; it can poll ``isCancelled`` to stop early). Then `final`,
    /// if given, runs as the lane's last job, on a worker thread, even after a cancel.
    /// Closing again is allowed: a later `.cancel` drops what a `.drain` left queued, and
    /// each call's `final` runs, in order. Final jobs are dropped only by an immediate
    /// shutdown.
    ///
    /// Closing a lane that has already finished still runs `final`. Returns false when
    /// `final` was given but refused because the pool is shutting down; it will then never
    /// run.
    @discardableResult
    public func close(
        _ mode: WorkerPool.CloseMode = .drain,
        then final: (@Sendable () -> Void)? = nil
    ) -> Bool {
        if mode == .cancel { cancelled.store(true, ordering: .releasing) }
        return pool.close(lane: id, meter: meter, mode: mode, final: final.map { Job(kind: .compute, body: $0) })
    }

    /// From inside one of this lane's jobs: once the job returns, the lane's other jobs wait
    /// until `unpark(first:)`. Does nothing if an unpark already came.
    public func park() {
        pool.park(lane: id)
    }

    /// Runs `job` next, ahead of the lane's queued jobs, and lets the lane go on (from any
    /// thread). Returns false when the pool no longer accepts work.
    @discardableResult
    public func unpark(first job: @escaping @Sendable () -> Void, kind: WorkerPool.JobKind = .compute) -> Bool {
        pool.unpark(lane: id, first: Job(kind: kind, body: job))
    }

    /// Whether the lane is parked now.
    public var isParked: Bool { pool.isParked(lane: id) }

    /// Whether the lane was closed with `.cancel`. Cheap enough to poll from a long job.
    public var isCancelled: Bool { cancelled.load(ordering: .acquiring) }

    /// Jobs waiting to start in this lane (the running one is not counted).
    public var depth: Int { pool.depth(lane: id) }

    /// Whether the calling thread is running one of this lane's jobs right now.
    public var isCurrent: Bool { pool.isRunningOnCurrentThread(lane: id) }

    /// The time this lane's compute jobs have taken so far (a running job counts once it
    /// ends). Lock-free: cheap enough to read for every talker at every tick.
    public var work: WorkerPool.Work { meter.work }
}

/// A value that only the jobs of one lane use, such as a session's decoder and recognizer.
///
/// The lane runs its jobs one at a time and orders them, so the value needs no lock even
/// if it is not `Sendable`. `LaneLocal` lets such a value be captured by the `@Sendable`
/// job closures and checks, on each access, that the caller really is a job of that lane:
/// access from anywhere else is a programming error and stops the process.
public final class LaneLocal<Value>: @unchecked Sendable {
    // Safety: `value` is only read or written inside `withValue`, which requires the
    // calling thread to be running a job of `lane`; a lane's jobs never overlap and are
    // ordered by the pool's lock, so accesses never race.
    private var value: Value
    /// The lane whose jobs may use the value.
    public let lane: Lane

    /// Hands `value` to `lane`'s jobs; the caller gives up its own access to it.
    public init(_ value: sending Value, lane: Lane) {
        self.value = value
        self.lane = lane
    }

    /// Runs `body` with the value. Call it only from a job of ``lane``.
    public func withValue<Result>(_ body: (inout Value) throws -> Result) rethrows -> Result {
        let allowed = lane.isCurrent
        precondition(allowed, "LaneLocal used outside a job of lane '\(lane.label)'")
        return try body(&value)
    }
}

// MARK: - Internals

private struct Job: Sendable {
    let kind: WorkerPool.JobKind
    let body: @Sendable () -> Void
}

private enum SubmitResult {
    case refused, queued, scheduled(WorkerPool.JobKind)
}

private enum SliceStep: Sendable {
    /// Run this job (its time goes to the lane's meter, if any), then ask again.
    case run(Job, WorkMeter?)
    /// The lane went back onto a ready queue: wake a thread of that kind.
    case yielded(WorkerPool.JobKind)
    /// The lane has no work left; `exit` when the pool is stopping and this was the last.
    case finished(exit: Bool)
}

/// The bookkeeping of one lane; only touched under the pool's lock.
private final class LaneState {
    /// Where its compute jobs' time goes (nil for ``WorkerPool/prepare(_:)``'s one-off lanes).
    let meter: WorkMeter?
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

    init(meter: WorkMeter?) {
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

private struct PoolState {
    var lanes: [Int: LaneState] = [:]
    var nextLaneID = 1
    var readyCompute = FIFO<Int>()
    var readyPreparation = FIFO<Int>()
    /// Lanes in a ready queue or held by a thread.
    var scheduledLanes = 0
    var queued = 0
    var completed = 0
    var dropped = 0
    var busyCompute = 0
    var busyPreparation = 0
    var stopping = false
    var exitSignalled = false
    var liveThreads = 0
    /// The pool's threads by system thread id.
    var threads: [UInt: WorkerPool.JobKind] = [:]

    subscript(ready kind: WorkerPool.JobKind) -> FIFO<Int> {
        get {
            switch kind {
            case .compute: return readyCompute
            case .preparation: return readyPreparation
            }
        }
        _modify {
            switch kind {
            case .compute: yield &readyCompute
            case .preparation: yield &readyPreparation
            }
        }
    }

    mutating func busy(_ kind: WorkerPool.JobKind, _ delta: Int) {
        switch kind {
        case .compute: busyCompute += delta
        case .preparation: busyPreparation += delta
        }
    }

    /// Puts an idle lane (or one a thread just gave up) on the ready queue of `kind`.
    /// The caller signals that kind's semaphore once, after the lock.
    mutating func schedule(_ id: Int, _ lane: LaneState, kind: WorkerPool.JobKind) {
        if !lane.scheduled {
            lane.scheduled = true
            scheduledLanes += 1
        }
        self[ready: kind].append(id)
    }

    /// True once, when the pool is stopping and no lane has work left.
    mutating func takeExitSignalIfIdle() -> Bool {
        guard stopping, scheduledLanes == 0, !exitSignalled else { return false }
        exitSignalled = true
        return true
    }

    mutating func nextStep(lane id: Int, kind: WorkerPool.JobKind, withinSlice: Bool, thread: UInt) -> SliceStep {
        guard let lane = lanes[id] else {
            // Not reachable: a scheduled lane stays registered until it finishes.
            busy(kind, -1)
            scheduledLanes -= 1
            return .finished(exit: takeExitSignalIfIdle())
        }
        if let head = lane.head {
            if head.kind == kind && withinSlice, let job = lane.popHead() {
                queued -= 1
                lane.runner = thread
                return .run(job, lane.meter)
            }
            // End of the slice, or the next job is for the other kind of thread.
            busy(kind, -1)
            self[ready: head.kind].append(id)
            return .yielded(head.kind)
        }
        busy(kind, -1)
        lane.scheduled = false
        scheduledLanes -= 1
        // A parked lane keeps its jobs for the unpark; a closed one that is done goes.
        if lane.closed && !lane.parked { lanes[id] = nil }
        return .finished(exit: takeExitSignalIfIdle())
    }
}

/// A first-in first-out queue with amortised O(1) operations.
private struct FIFO<Element> {
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

/// Time taken by compute jobs, added to by the threads that run them and read by anyone:
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

/// The CPU time of the calling thread, in seconds (0 where the clock is missing).
private func threadCPUSeconds() -> Double {
    var time = timespec()
    guard clock_gettime(CLOCK_THREAD_CPUTIME_ID, &time) == 0 else { return 0 }
    return Double(time.tv_sec) + Double(time.tv_nsec) / 1e9
}

private func currentThreadID() -> UInt {
    #if canImport(Glibc)
    return UInt(pthread_self())
    #else
    return UInt(bitPattern: pthread_self())
    #endif
}

extension Duration {
    fileprivate var nanoseconds: Int {
        let (seconds, attoseconds) = components
        let total = Double(seconds) * 1e9 + Double(attoseconds) / 1e9
        if total >= Double(Int.max) { return Int.max }
        return Int(total)
    }
}
