/// Joins the pieces of one connection's incoming WebSocket messages, as libwebsockets hands
/// them over (a message may arrive in several RECEIVE callbacks), and enforces the size limit
/// on whole messages, fragments together. Pure: no lws, no I/O, testable without sockets.
struct MessageAssembler {
    enum Outcome: Equatable {
        /// The message is not complete yet (or is being dropped).
        case pending
        /// A complete message.
        case message(IncomingMessage)
        /// The message went over the limit: what was buffered is dropped, and so is the rest
        /// of it as it arrives. Reported once per message.
        case tooLarge
    }

    /// Largest message accepted, in bytes.
    let limit: Int
    private var buffer: [UInt8] = []
    private var inMessage = false
    private var isBinary = false
    private var discarding = false

    init(limit: Int) {
        self.limit = limit
    }

    /// Bytes held for the message in progress.
    var buffered: Int { buffer.count }

    /// How many bytes more `receive` would hold for this piece until the message is whole: none
    /// for a message whole in one piece, the last piece of one, or one being dropped.
    func growth(_ count: Int, final: Bool, remaining: Int) -> Int {
        final || discarding || !fits(count, remaining: remaining) ? 0 : count
    }

    /// Whether a piece of `count` bytes, with `remaining` more announced, fits the limit.
    private func fits(_ count: Int, remaining: Int) -> Bool {
        buffer.count + count <= limit && remaining <= limit - buffer.count - count
    }

    /// One piece of a message: `binary` is the message's type (read with its first piece),
    /// `final` whether this piece ends it.
    /// `remaining` is how many more bytes the piece's frame announced (its header's length
    /// less what came): a message that cannot fit is too large now.
    mutating func receive(_ piece: UnsafeRawBufferPointer, binary: Bool, final: Bool, remaining: Int = 0) -> Outcome {
        if !inMessage {
            inMessage = true
            isBinary = binary
            discarding = false
            // The common case: a whole message in one piece, with a single copy out of
            // lws's buffer.
            if final && remaining == 0 && piece.count <= limit {
                inMessage = false
                return .message(Self.message(binary: isBinary, piece))
            }
        }
        var outcome = Outcome.pending
        if !discarding {
            if !fits(piece.count, remaining: remaining) {
                discarding = true
                buffer = []
                outcome = .tooLarge
            } else {
                buffer.append(contentsOf: piece)
            }
        }
        if final {
            inMessage = false
            let bytes = buffer
            buffer = []
            if !discarding {
                // The joined fragments are handed over as they are (no copy).
                outcome = .message(isBinary ? .binary(bytes) : .text(String(decoding: bytes, as: UTF8.self)))
            }
            discarding = false
        }
        return outcome
    }

    /// What a frame's header announced before any of its payload came (lws calls nothing for a
    /// header alone, so the service loop asks on its ticks): `.tooLarge`, once, if the message
    /// cannot fit, and the rest of it is then dropped as it arrives; else `.pending`. A header of
    /// 125 bytes or fewer may be a ping's (control frames come between a message's fragments,
    /// RFC 6455 §5.4, and never reach `receive`): such a data frame is judged by its first byte.
    mutating func announced(_ remaining: Int) -> Outcome {
        guard remaining > 125, !discarding, !fits(0, remaining: remaining) else { return .pending }
        inMessage = true
        discarding = true
        buffer = []
        return .tooLarge
    }

    /// Forgets a message in progress (the connection is closing).
    mutating func reset() {
        buffer = []
        inMessage = false
        discarding = false
    }

    private static func message(binary: Bool, _ bytes: UnsafeRawBufferPointer) -> IncomingMessage {
        binary ? .binary([UInt8](bytes)) : .text(String(decoding: bytes, as: UTF8.self))
    }
}
