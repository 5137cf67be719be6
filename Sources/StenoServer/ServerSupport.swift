import StenoCore
import StenoSession
import StenoSpeech
import StenoTransport
import StenoWorkers
import Synchronization

#if canImport(Glibc)
import Glibc
#endif

/// What every session of a server shares.
struct ServerContext: Sendable {
    let handle: TransportHandle
    let engine: any SpeechEngine
    let pool: WorkerPool
    let metrics: StenoMetrics
    let log: ServerLog
    let channels: ChannelHub
    let sessionConfiguration: SessionConfiguration
}


/// The server's log: one line per event worth knowing, to stderr, with a UTC timestamp.
public struct ServerLog: Sendable {
    public enum Level: Int, Sendable, Comparable {
        case debug, info, warning, error
        public static func < (a: Level, b: Level) -> Bool { a.rawValue < b.rawValue }
        var label: String { ["debug", "info", "warning", "error"][rawValue] }
    }

    public let minimum: Level
    private let sink: @Sendable (String) -> Void

    /// A log that writes lines at or above `minimum` to `sink` (stderr by default).
    public init(minimum: Level = .info, sink: (@Sendable (String) -> Void)? = nil) {
        self.minimum = minimum
        self.sink = sink ?? { line in
            var bytes = Array(line.utf8)
            bytes.append(UInt8(ascii: "\n"))
            _ = bytes.withUnsafeBytes { write(2, $0.baseAddress, $0.count) }
        }
    }

    public func debug(_ message: @autoclosure () -> String) { emit(.debug, message) }
    public func info(_ message: @autoclosure () -> String) { emit(.info, message) }
    public func warning(_ message: @autoclosure () -> String) { emit(.warning, message) }
    public func error(_ message: @autoclosure () -> String) { emit(.error, message) }

    private func emit(_ level: Level, _ message: () -> String) {
        guard level >= minimum else { return }
        sink("\(SessionClock.wall().iso8601) \(level.label) \(message())")
    }
}

extension OutgoingMessage {
    /// An event as a text message; its connection writes its `seq` as it sends it.
    init(_ event: EncodedEvent) {
        self.init(kind: .text, bytes: event.bytes, delivery: event.delivery, ordinalSlot: event.seqDigits)
    }
}

extension StenoMetrics {
    /// A viewer whose queue overflowed is not reading: counted, and closed with 4008 at once,
    /// its queue discarded. (Sessions go through their state machine instead.)
    func closeSlowConsumer(_ id: ConnectionID, on handle: TransportHandle) {
        errorSent(.slowConsumer)
        handle.close(id, code: ErrorCode.slowConsumer.closeCode ?? 4008, reason: "slow_consumer", discardQueued: true)
    }
}
