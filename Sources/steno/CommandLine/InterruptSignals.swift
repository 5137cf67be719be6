import Dispatch
import Glibc
import Synchronization

/// SIGINT and SIGTERM, taken by dispatch sources rather than a handler, so that the main loop
/// (or serve's drain) acts on them on a thread of its own. SIGPIPE is ignored: a peer that
/// went is an error from write, not the end of the process. The sources must be kept alive.
enum InterruptSignals {
    /// `onSignal` gets how many of the two signals have come so far (1 for the first).
    static func install(_ onSignal: @escaping @Sendable (Int) -> Void) -> [any DispatchSourceSignal] {
        var wanted = sigset_t()
        sigemptyset(&wanted)
        sigaddset(&wanted, SIGTERM)
        sigaddset(&wanted, SIGINT)
        // A parent may have started us with these signals blocked (the mask is inherited).
        pthread_sigmask(SIG_UNBLOCK, &wanted, nil)
        signal(SIGTERM, SIG_IGN)
        signal(SIGINT, SIG_IGN)
        signal(SIGPIPE, SIG_IGN)
        let count = Atomic<Int>(0)
        return [SIGINT, SIGTERM].map { number in
            let source = DispatchSource.makeSignalSource(signal: number, queue: .global())
            source.setEventHandler { onSignal(count.add(1, ordering: .relaxed).newValue) }
            source.resume()
            return source
        }
    }
}
