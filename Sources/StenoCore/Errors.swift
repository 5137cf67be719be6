/// The error codes of the wire protocol (docs/protocol.md, "Errors and close codes").
public enum ErrorCode: String, Sendable, CaseIterable, Hashable {
    case badMessage = "bad_message"
    case badAudio = "bad_audio"
    case notStarted = "not_started"
    case unsupportedAudio = "unsupported_audio"
    case tooLarge = "too_large"
    case slowConsumer = "slow_consumer"
    case sessionLimit = "session_limit"
    case idle = "idle"
    case shuttingDown = "shutting_down"
    case resumeFailed = "resume_failed"
    /// An utterance in none of the session's languages (lanes): no final for it.
    case lowConfidence = "low_confidence"
    case `internal` = "internal"

    /// The WebSocket close code that follows a fatal error of this kind; nil for non-fatal codes.
    public var closeCode: UInt16? {
        switch self {
        case .badMessage, .badAudio, .lowConfidence: return nil
        case .notStarted: return 4400
        case .unsupportedAudio: return 1003
        case .tooLarge: return 1009
        case .slowConsumer: return 4008
        case .sessionLimit: return 4009
        case .idle: return 4010
        case .shuttingDown: return 1001
        case .resumeFailed: return 4404
        case .internal: return 1011
        }
    }

    /// Whether the session ends after this error.
    public var isFatal: Bool { closeCode != nil }
}

/// An error a client can be told about: a protocol code and a message in plain words.
public struct StenoError: Error, Sendable, Equatable, CustomStringConvertible {
    public var code: ErrorCode
    public var message: String

    public init(_ code: ErrorCode, _ message: String) {
        self.code = code
        self.message = message
    }

    public var description: String { "\(code.rawValue): \(message)" }
}

extension StenoError: Hashable {}
