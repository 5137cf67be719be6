import Foundation

/// A value guarded by a lock. NSLock rather than Synchronization.Mutex: on Linux,
/// ThreadSanitizer does not see Mutex's futex waits and reports false races.
final class Locked<State>: @unchecked Sendable {
    private let lock = NSLock()
    private var state: State

    init(_ state: State) {
        self.state = state
    }

    func withLock<R>(_ body: (inout State) throws -> R) rethrows -> R {
        lock.lock()
        defer { lock.unlock() }
        return try body(&state)
    }
}
