#if canImport(Glibc)
import Glibc
#endif

/// How much a log says, least first.
public enum LogLevel: String, Sendable, CaseIterable, Comparable {
    case error, warning, info, debug
    /// Debug, and pocketsphinx's own log too.
    case trace

    private var rank: Int { Self.allCases.firstIndex(of: self) ?? 0 }

    public static func < (a: LogLevel, b: LogLevel) -> Bool { a.rank < b.rank }
}

/// The one logger: a line per event worth knowing, `2026-11-29T19:07:13.211Z info message`,
/// to standard error unless given another sink. Used by the server, the transport and the
/// command-line tools alike.
public struct Log: Sendable {
    public let minimum: LogLevel
    private let sink: @Sendable (String) -> Void

    /// Lines of `minimum` and of the levels before it (`error` first) go to `sink` (standard
    /// error by default): a log at `info` writes errors, warnings and info.
    public init(minimum: LogLevel = .info, sink: (@Sendable (String) -> Void)? = nil) {
        self.minimum = minimum
        self.sink = sink ?? { line in
            var bytes = Array(line.utf8)
            bytes.append(UInt8(ascii: "\n"))
            _ = bytes.withUnsafeBytes { write(2, $0.baseAddress, $0.count) }
        }
    }

    /// A log that writes nothing.
    public static let silent = Log(minimum: .error, sink: { _ in })

    public func error(_ message: @autoclosure () -> String) { emit(.error, message) }
    public func warning(_ message: @autoclosure () -> String) { emit(.warning, message) }
    public func info(_ message: @autoclosure () -> String) { emit(.info, message) }
    public func debug(_ message: @autoclosure () -> String) { emit(.debug, message) }

    /// Whether lines at `level` are written (to skip building costly ones).
    public func isEnabled(_ level: LogLevel) -> Bool { level <= minimum }

    public func callAsFunction(_ level: LogLevel, _ message: @autoclosure () -> String) { emit(level, message) }

    private func emit(_ level: LogLevel, _ message: () -> String) {
        guard isEnabled(level) else { return }
        sink("\(SystemClock.wall().iso8601) \(level.rawValue) \(message())")
    }
}
