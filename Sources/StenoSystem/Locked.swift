import Foundation

/// A value guarded by a lock, like `Synchronization.Mutex`, but built on a pthread mutex
/// (`NSLock`): on Linux `Mutex` waits with raw futex calls that ThreadSanitizer cannot see, so
/// it reports every `Mutex` as a data race and hides real ones. The transport, the server's
/// sessions, registry, channels and relay, the worker pool and the metrics use it, and the
/// benchmarks.
///
/// Safety: `state` is only reached inside `withLock`, under the lock. Like `Mutex`, it is the
/// caller's job not to let non-Sendable parts of the state escape from the closure.
public final class Locked<State>: @unchecked Sendable {
    private let lock = NSLock()
    private var state: State

    public init(_ state: State) {
        self.state = state
    }

    public func withLock<R>(_ body: (inout State) throws -> R) rethrows -> R {
        lock.lock()
        defer { lock.unlock() }
        return try body(&state)
    }
}
