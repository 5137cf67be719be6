#if canImport(Glibc)
import Glibc
#endif

/// The process's limit on open files (RLIMIT_NOFILE). Every socket is one: a server holding
/// N WebSocket connections needs N descriptors plus a few dozen of its own.
public struct OpenFileLimit: Sendable, Equatable, CustomStringConvertible {
    /// The limit in force (`ulimit -Sn`).
    public var soft: UInt64
    /// How far an unprivileged process may raise it (`ulimit -Hn`).
    public var hard: UInt64
    /// The soft limit before `raise()` changed it, if it did.
    public var raisedFrom: UInt64?

    public init(soft: UInt64, hard: UInt64, raisedFrom: UInt64? = nil) {
        self.soft = soft
        self.hard = hard
        self.raisedFrom = raisedFrom
    }

    /// The limits now.
    public static func current() -> OpenFileLimit {
        var limit = rlimit()
        guard getrlimit(Int32(RLIMIT_NOFILE.rawValue), &limit) == 0 else { return OpenFileLimit(soft: 0, hard: 0) }
        return OpenFileLimit(soft: UInt64(limit.rlim_cur), hard: UInt64(limit.rlim_max))
    }

    /// Raises the soft limit to the hard one (no privilege needed), and returns the limits
    /// then in force; `raisedFrom` says whether it changed. An infinite hard limit is taken as
    /// the kernel's `nr_open`, the most a process can have.
    @discardableResult
    public static func raise() -> OpenFileLimit {
        var limit = rlimit()
        guard getrlimit(Int32(RLIMIT_NOFILE.rawValue), &limit) == 0 else { return OpenFileLimit(soft: 0, hard: 0) }
        let before = UInt64(limit.rlim_cur)
        var target = limit.rlim_max
        if target == rlim_t.max { target = rlim_t(nrOpen() ?? UInt64(limit.rlim_cur)) }
        guard target > limit.rlim_cur else { return current() }
        var wanted = limit
        wanted.rlim_cur = target
        guard setrlimit(Int32(RLIMIT_NOFILE.rawValue), &wanted) == 0 else { return current() }
        var now = current()
        if now.soft != before { now.raisedFrom = before }
        return now
    }

    private static func nrOpen() -> UInt64? {
        let fd = open("/proc/sys/fs/nr_open", O_RDONLY)
        guard fd >= 0 else { return nil }
        defer { close(fd) }
        var bytes = [UInt8](repeating: 0, count: 32)
        let n = read(fd, &bytes, bytes.count)
        guard n > 0 else { return nil }
        return UInt64(String(decoding: bytes[0..<n], as: UTF8.self).filter(\.isNumber))
    }

    public var description: String {
        let hardText = hard == UInt64.max ? "unlimited" : "\(hard)"
        if let from = raisedFrom { return "\(soft) (raised from \(from); hard limit \(hardText))" }
        return soft == hard ? "\(soft) (the hard limit)" : "\(soft) (hard limit \(hardText), not raised)"
    }
}
