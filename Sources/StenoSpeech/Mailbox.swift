import StenoSystem

/// Where something that answers a recognizer from another thread leaves its answers, and how
/// the recognizer's session is woken to take them: a shared pool granting a decoder
/// (`PoolWaiter`), an engine's worker process answering a request (Whisper).
///
/// The recognizer itself is used from one thread at a time and never blocks: it posts its
/// requests, says it waits (`SpeechRecognizer.isWaiting`), and when `wake` has been called,
/// its `proceed()` collects what has come. Posting and collecting take a lock for a few
/// instructions; `wake` is called outside it.
public final class Mailbox<Message: Sendable>: Sendable {
    private struct State {
        var messages: [Message] = []
        var closed = false
    }
    private let wake: @Sendable () -> Void
    private let state = Locked(State())

    /// `wake`: called, from the poster's thread, after each message posted.
    public init(wake: @escaping @Sendable () -> Void) {
        self.wake = wake
    }

    /// Leaves `message` and wakes the recognizer; false (and nothing kept, nobody woken) once
    /// the mailbox is closed.
    @discardableResult
    public func post(_ message: Message) -> Bool {
        guard keep(message) else { return false }
        wake()
        return true
    }

    /// Leaves `message` without waking anyone: for an answer the recognizer makes itself, on
    /// its own thread (it collects it at its next call). False once the mailbox is closed.
    @discardableResult
    public func keep(_ message: Message) -> Bool {
        state.withLock { s in
            guard !s.closed else { return false }
            s.messages.append(message)
            return true
        }
    }

    /// The messages posted since the last collection, oldest first.
    public func collect() -> [Message] {
        state.withLock { s in
            defer { s.messages.removeAll() }
            return s.messages
        }
    }

    /// Nothing is posted from now on; returns what was posted and not collected (for the
    /// caller to hand back what it must not keep).
    public func close() -> [Message] {
        state.withLock { s in
            s.closed = true
            defer { s.messages.removeAll() }
            return s.messages
        }
    }
}
