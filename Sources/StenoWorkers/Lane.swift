// Lanes: the serial queue a session submits its jobs to (`Lane`), and the pool's side of each lane operation (submit, close, park,
// unpark), which only `Lane` calls.

import Synchronization

extension WorkerPool {
    // MARK: Lane operations (called by Lane)

    fileprivate func submit(lane id: Int, job: Job) -> Bool {
        let result: SubmitResult = state.withLock { s in
            guard !s.stopping, let lane = s.lanes[id], !lane.closed else { return .refused }
            lane.jobs.append(job)
            s.queued += 1
            if lane.scheduled || lane.parked { return .queued }
            s.schedule(id, lane)
            return .scheduled
        }
        switch result {
        case .refused: return false
        case .queued: return true
        case .scheduled:
            wake()
            return true
        }
    }

    fileprivate func close(lane id: Int, meter: WorkMeter, mode: CloseMode, final: Job?) -> Bool {
        let (accepted, dropped, signal): (Bool, [Job], Bool) = state.withLock { s in
            let lane: LaneState
            if let existing = s.lanes[id] {
                lane = existing
            } else {
                // The lane has already finished: only a final job is left to run.
                guard final != nil, !s.stopping else { return (final == nil, [], false) }
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
            if lane.scheduled { return (accepted, dropped, false) }
            // An idle lane has no jobs; only its final jobs can be left.
            if !lane.finals.isEmpty {
                s.schedule(id, lane)
                return (accepted, dropped, true)
            }
            s.lanes[id] = nil
            return (accepted, dropped, false)
        }
        _ = dropped  // released after the lock, see shutdown
        if signal { wake() }
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
            s.schedule(id, lane)
            return .scheduled
        }
        switch result {
        case .refused: return false
        case .queued: return true
        case .scheduled:
            wake()
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
}

private enum SubmitResult {
    case refused, queued, scheduled
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
    /// The time its jobs have taken.
    fileprivate let meter: WorkMeter

    init(pool: WorkerPool, id: Int, label: String, meter: WorkMeter) {
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
    @discardableResult
    public func submit(_ job: @escaping @Sendable () -> Void) -> Bool {
        pool.submit(lane: id, job: Job(body: job))
    }

    /// Closes the lane: later `submit` calls are refused.
    ///
    /// `.drain` lets the queued jobs run; `.cancel` drops the ones that have not started
    /// (a running job finishes; it can poll ``isCancelled`` to stop early). Then `final`,
    /// if given, runs as the lane's last job, even after a cancel.
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
        return pool.close(lane: id, meter: meter, mode: mode, final: final.map { Job(body: $0) })
    }

    /// From inside one of this lane's jobs: once the job returns, the lane's other jobs wait
    /// until `unpark(first:)`. Does nothing if an unpark already came.
    public func park() {
        pool.park(lane: id)
    }

    /// Runs `job` next, ahead of the lane's queued jobs, and lets the lane go on (from any
    /// thread). Returns false when the pool no longer accepts work.
    @discardableResult
    public func unpark(first job: @escaping @Sendable () -> Void) -> Bool {
        pool.unpark(lane: id, first: Job(body: job))
    }

    /// Whether the lane is parked now.
    public var isParked: Bool { pool.isParked(lane: id) }

    /// Whether the lane was closed with `.cancel`. Cheap enough to poll from a long job.
    public var isCancelled: Bool { cancelled.load(ordering: .acquiring) }

    /// Jobs waiting to start in this lane (the running one is not counted).
    public var depth: Int { pool.depth(lane: id) }

    /// Whether the calling thread is running one of this lane's jobs right now.
    public var isCurrent: Bool { pool.isRunningOnCurrentThread(lane: id) }

    /// The time this lane's jobs have taken so far (a running job counts once it
    /// ends). Lock-free: cheap enough to read for every talker at every tick.
    public var work: WorkerPool.Work { meter.work }

    /// Adds compute done for this lane elsewhere (an engine's worker process, its CPU seconds)
    /// to ``work``, so that the lane's work is all its session costs the machine.
    public func charge(busy seconds: Double) {
        meter.add(busy: seconds, cpu: seconds)
    }
}
