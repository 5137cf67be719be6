import Foundation
import StenoSystem
import StenoTestSupport

// End-to-end test support: polling, and work on threads of its own.

/// Polls until `condition` holds; false if it did not within `timeout` (a guard, not a timing).
@discardableResult
func eventually(timeout: Double = 30, _ condition: () throws -> Bool) rethrows -> Bool {
    let deadline = Deadline(timeout)
    while try !condition() {
        if deadline.hasPassed { return false }
        usleep(10_000)
    }
    return true
}

/// Numbers shared between threads.
final class SharedCounters: Sendable {
    private let values: Locked<[Int]>
    init(count: Int) { values = Locked([Int](repeating: 0, count: count)) }
    subscript(i: Int) -> Int {
        get { values.withLock { $0[i] } }
    }
    func set(_ i: Int, _ value: Int) { values.withLock { $0[i] = value } }
    var all: [Int] { values.withLock { $0 } }
}

/// A body running on a thread of its own.
final class BackgroundJob<T: Sendable>: Sendable {
    private let result = Locked<T?>(nil)
    private let done = DispatchSemaphore(value: 0)

    init(_ body: @escaping @Sendable () -> T) {
        let thread = Thread { [self] in
            let value = body()
            result.withLock { $0 = value }
            done.signal()
        }
        thread.start()
    }

    /// Waits for the result (nil if it did not come within `timeout`).
    func wait(timeout: Double = 120) -> T? {
        guard done.wait(timeout: .now() + timeout) == .success else { return nil }
        done.signal()
        return result.withLock { $0 }
    }
}

/// Runs each body on its own thread (blocking socket work must not occupy Swift
/// concurrency's few threads) and returns their results in order.
func onThreads<T: Sendable>(_ bodies: [@Sendable () throws -> T]) -> [Result<T, any Error>] {
    let results = Locked<[Int: Result<T, any Error>]>([:])
    let done = DispatchSemaphore(value: 0)
    for (i, body) in bodies.enumerated() {
        let thread = Thread {
            let r = Result { try body() }
            results.withLock { $0[i] = r }
            done.signal()
        }
        thread.stackSize = 4 << 20
        thread.start()
    }
    for _ in bodies { done.wait() }
    return results.withLock { r in bodies.indices.map { r[$0]! } }
}
