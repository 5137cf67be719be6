import Dispatch
import StenoSystem
import StenoTransport

#if canImport(Glibc)
import Glibc
#endif

/// What the client's main loop reacts to, from every thread: the connection's events (tagged
/// with the attempt they belong to, so a late event of an old connection is not mistaken for
/// the current one's), new audio, the end of the input, and interrupts.
enum ClientInput: Sendable {
    case socket(attempt: Int, WebSocketClientEvent)
    /// New audio frames are waiting.
    case audio
    /// The input has no more audio; `error` when it failed.
    case inputEnded(error: String?)
    /// SIGINT or SIGTERM, the `count`-th one.
    case interrupt(count: Int)
    /// A caption bridge (`steno listen --obs`, `--youtube-url`) cannot go on: the command
    /// exits with `code`.
    case bridgeFailed(code: Int32, message: String)
}

/// The client's main loop's queue.
typealias Inbox = BlockingQueue<ClientInput>

/// A queue many threads post to and one thread waits on (StenoSpeech's `Mailbox`, by contrast,
/// never blocks: it calls a wake-up).
final class BlockingQueue<Item: Sendable>: Sendable {
    // `Locked`, not `Mutex`: ThreadSanitizer cannot see a `Mutex` on Linux (StenoSystem.Locked).
    private let items = Locked<[Item]>([])
    private let signal = DispatchSemaphore(value: 0)

    func post(_ input: Item) {
        items.withLock { $0.append(input) }
        signal.signal()
    }

    /// Everything posted so far, waiting up to `timeout` seconds for something when there is
    /// nothing yet (nil: as long as it takes). Empty when the time passed.
    func take(timeout: Double?) -> [Item] {
        let waiting = items.withLock { $0.isEmpty }
        if waiting {
            if let timeout {
                _ = signal.wait(timeout: .now() + max(0, timeout))
            } else {
                signal.wait()
            }
        }
        return items.withLock { list in
            let taken = list
            list.removeAll(keepingCapacity: true)
            return taken
        }
    }
}

extension InterruptSignals {
    /// Each signal posted to `inbox` with how many have come.
    static func install(into inbox: Inbox) -> [any DispatchSourceSignal] {
        install { n in inbox.post(.interrupt(count: n)) }
    }
}
