// Where a session is in its life (`SessionPhase`), the close each end asks for, and why a
// session ends on the server's initiative or the client's (`EndReason`).

/// Why a session is ending.
public enum EndReason: Sendable, Hashable {
    /// The client sent `end`.
    case requested
    /// `limits.maxSessionSeconds` was reached.
    case sessionLimit
    /// `limits.idleTimeoutSeconds` passed without client frames or analysis progress.
    case idle
    /// The server is shutting down.
    case shuttingDown
    /// The connection dropped and the client did not resume within `limits.resumeSeconds`.
    case abandoned

    /// The error sent after the finals, or nil for a client's `end` (which gets `ended`).
    public var errorCode: ErrorCode? {
        switch self {
        case .requested: return nil
        case .sessionLimit: return .sessionLimit
        case .idle: return .idle
        case .shuttingDown: return .shuttingDown
        case .abandoned: return nil
        }
    }
}

/// Where a session is in its life.
public enum SessionPhase: Sendable, Hashable {
    case awaitingStart
    /// Started; no finalize outstanding.
    case streaming
    /// Started; at least one `finalize` is outstanding.
    case finalizing
    /// End of input submitted; waiting for the pipeline's last finals.
    case ending(EndReason)
    /// Closed after `ended` (1000).
    case ended
    /// Closed after `cancelled` (1000).
    case cancelled
    /// Closed after a fatal error with this code.
    case failed(ErrorCode)
    /// The peer went away.
    case disconnected

    /// The WebSocket close the session asked for (nil while open, and when the peer left).
    public var close: (code: UInt16, reason: String)? {
        switch self {
        case .ended: return (1000, "ended")
        case .cancelled: return (1000, "cancelled")
        case .failed(let code): return (code.closeCode ?? 1011, code.rawValue)
        default: return nil
        }
    }

    /// True once the session has closed or asked to close: no input produces anything more.
    public var isClosed: Bool {
        switch self {
        case .ended, .cancelled, .failed, .disconnected: return true
        default: return false
        }
    }
}
