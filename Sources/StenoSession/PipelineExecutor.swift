// Where a session's pipeline jobs run: the `PipelineExecutor` a driver is given (a worker
// `Lane` in the server, `InlineExecutor` in the calling thread for a file), and the value only
// its jobs may touch (`PipelineLocal`).

import Dispatch
import StenoSystem
import StenoWorkers

#if canImport(Glibc)
import Glibc
#endif

/// Runs one session's pipeline jobs one at a time, in the order they were queued, each seeing
/// what the one before it did. All methods may be called from any thread and never wait for a job.
public protocol PipelineExecutor: AnyObject, Sendable {
    /// Queues `job` behind the others. False, and it never runs, once closed.
    @discardableResult
    func enqueue(_ job: @escaping @Sendable () -> Void) -> Bool
    /// From inside a job: once it returns, the queued jobs wait for `resume(first:)` (the
    /// recognizer waits for a shared decoder or for its engine's answer).
    func pause()
    /// Runs `job` next, ahead of the queued ones, and lets the jobs go on (from any thread).
    func resume(first job: @escaping @Sendable () -> Void)
    /// No more jobs are taken: `cancelling` drops those not started; then `final` runs last.
    func finish(cancelling: Bool, then final: (@Sendable () -> Void)?)
    /// CPU seconds spent for the session elsewhere (an engine's worker process), added to
    /// what its jobs cost (admission reads it).
    func charge(busy seconds: Double)
    /// Whether the calling thread is running one of its jobs now.
    var isCurrent: Bool { get }
}

/// A server's sessions run on the worker pool's lanes.
extension Lane: PipelineExecutor {
    public func enqueue(_ job: @escaping @Sendable () -> Void) -> Bool { submit(job) }
    public func pause() { park() }
    public func resume(first job: @escaping @Sendable () -> Void) { unpark(first: job) }
    public func finish(cancelling: Bool, then final: (@Sendable () -> Void)?) {
        close(cancelling ? .cancel : .drain, then: final)
    }
}

/// Jobs run in the thread that calls `runUntilIdle()` (a file transcribed, an in-memory test):
/// queued jobs run in order until none is left; while paused it waits for `resume(first:)`,
/// which may come from another thread (a shared decoder granted, the engine's answer).
public final class InlineExecutor: PipelineExecutor {
    private struct State {
        var jobs: [@Sendable () -> Void] = []
        var first: [@Sendable () -> Void] = []
        var finals: [@Sendable () -> Void] = []
        var paused = false
        var closed = false
        var runner: pthread_t?
    }

    private let state = Locked(State())
    private let resumed = DispatchSemaphore(value: 0)

    public init() {}

    public func enqueue(_ job: @escaping @Sendable () -> Void) -> Bool {
        state.withLock { s in
            guard !s.closed else { return false }
            s.jobs.append(job)
            return true
        }
    }

    public func pause() {
        state.withLock { s in
            // A resume that already came (its job waits first) wins.
            if s.first.isEmpty && !s.closed { s.paused = true }
        }
    }

    public func resume(first job: @escaping @Sendable () -> Void) {
        state.withLock { s in
            s.first.append(job)
            s.paused = false
        }
        resumed.signal()
    }

    public func finish(cancelling: Bool, then final: (@Sendable () -> Void)?) {
        state.withLock { s in
            s.closed = true
            s.paused = false
            if cancelling {
                s.jobs.removeAll()
                s.first.removeAll()
            }
            if let final { s.finals.append(final) }
        }
        resumed.signal()
    }

    public func charge(busy seconds: Double) {}

    public var isCurrent: Bool {
        state.withLock { s in s.runner.map { pthread_equal($0, pthread_self()) != 0 } ?? false }
    }

    /// Whether jobs wait for a `resume(first:)`.
    public var isPaused: Bool { state.withLock { $0.paused } }

    /// Jobs queued and not yet run.
    public var queuedCount: Int { state.withLock { $0.first.count + $0.jobs.count + $0.finals.count } }

    /// Runs the queued jobs, in order, until none is left. While paused, waits for the resume.
    public func runUntilIdle() {
        while true {
            enum Next { case run(@Sendable () -> Void), wait, idle }
            let next: Next = state.withLock { s in
                if !s.first.isEmpty { return .run(s.first.removeFirst()) }
                if s.paused { return .wait }
                if !s.jobs.isEmpty { return .run(s.jobs.removeFirst()) }
                if !s.finals.isEmpty { return .run(s.finals.removeFirst()) }
                return .idle
            }
            switch next {
            case .idle:
                return
            case .wait:
                resumed.wait()
            case .run(let job):
                state.withLock { $0.runner = pthread_self() }
                job()
                state.withLock { $0.runner = nil }
            }
        }
    }
}

/// A value only the jobs of one executor use (a session's pipeline): they run one at a time
/// and in order, so it needs no lock even if it is not `Sendable`; each access checks that the
/// caller is one of those jobs.
public final class PipelineLocal<Value>: @unchecked Sendable {
    // Safety: `value` is only reached inside `withValue`, which requires the calling thread to
    // be running a job of `executor`; its jobs never overlap and are ordered.
    private var value: Value
    private let executor: any PipelineExecutor

    public init(_ value: sending Value, executor: any PipelineExecutor) {
        self.value = value
        self.executor = executor
    }

    /// Runs `body` with the value. Call it only from a job of the executor.
    public func withValue<Result>(_ body: (inout Value) throws -> Result) rethrows -> Result {
        precondition(executor.isCurrent, "a session's pipeline used outside its jobs")
        return try body(&value)
    }
}
