import CHiredis
#if canImport(Glibc)
import Glibc
#endif

/// Where a Redis server is: `redis://[[USER]:PASSWORD@]HOST[:PORT][/DB]` (port 6379 by
/// default, database 0).
public struct RedisURL: Sendable, Equatable, CustomStringConvertible {
    public var host: String
    public var port: Int
    public var database: Int
    public var user: String?
    public var password: String?

    public init(host: String, port: Int = 6379, database: Int = 0, user: String? = nil, password: String? = nil) {
        self.host = host
        self.port = port
        self.database = database
        self.user = user
        self.password = password
    }

    /// Parses `text`; nil when it is not such a URL (the reason is for a usage error).
    public static func parse(_ text: String) -> Result<RedisURL, RedisURLError> {
        guard text.hasPrefix("redis://") else { return .failure(RedisURLError("it does not start with redis://")) }
        var rest = Substring(text.dropFirst("redis://".count))
        var url = RedisURL(host: "")
        if let slash = rest.firstIndex(of: "/") {
            let path = rest[rest.index(after: slash)...]
            rest = rest[..<slash]
            if !path.isEmpty {
                guard let db = Int(path), db >= 0, db < 10_000 else { return .failure(RedisURLError("the database is not a number")) }
                url.database = db
            }
        }
        if let at = rest.lastIndex(of: "@") {
            let credentials = rest[..<at]
            rest = rest[rest.index(after: at)...]
            if let colon = credentials.firstIndex(of: ":") {
                let user = credentials[..<colon]
                url.user = user.isEmpty ? nil : String(user)
                url.password = String(credentials[credentials.index(after: colon)...])
            } else {
                url.password = String(credentials)
            }
        }
        if rest.hasPrefix("[") {
            guard let close = rest.firstIndex(of: "]") else { return .failure(RedisURLError("an IPv6 address without its ]")) }
            url.host = String(rest[rest.index(after: rest.startIndex)..<close])
            rest = rest[rest.index(after: close)...]
            if !rest.isEmpty {
                guard rest.hasPrefix(":") else { return .failure(RedisURLError("something after the address")) }
                rest = rest.dropFirst()
                guard let port = Int(rest), (1...65535).contains(port) else { return .failure(RedisURLError("the port is not 1-65535")) }
                url.port = port
            }
        } else if let colon = rest.lastIndex(of: ":") {
            url.host = String(rest[..<colon])
            guard let port = Int(rest[rest.index(after: colon)...]), (1...65535).contains(port) else {
                return .failure(RedisURLError("the port is not 1-65535"))
            }
            url.port = port
        } else {
            url.host = String(rest)
        }
        guard !url.host.isEmpty, !url.host.contains(where: { $0 == " " || $0 == "/" || $0 == "@" }) else {
            return .failure(RedisURLError("it names no host"))
        }
        return .success(url)
    }

    public var description: String {
        let host = self.host.contains(":") ? "[\(self.host)]" : self.host
        return "redis://\(host):\(port)" + (database == 0 ? "" : "/\(database)")
    }
}

public struct RedisURLError: Error, Sendable, Equatable {
    public let reason: String
    public init(_ reason: String) { self.reason = reason }
}

/// Why a Redis call failed.
public enum RedisError: Error, Sendable, Equatable, CustomStringConvertible {
    /// The server could not be reached (or the connection was lost, or it timed out).
    case connection(String)
    /// The server answered with bytes that are not RESP.
    case protocolError(String)
    /// The server answered the command with an error reply (`-ERR …`, `-WRONGTYPE …`).
    case server(String)

    public var description: String {
        switch self {
        case .connection(let s): return "Redis connection: \(s)"
        case .protocolError(let s): return "Redis protocol: \(s)"
        case .server(let s): return "Redis: \(s)"
        }
    }
}

/// One connection to Redis (hiredis's blocking `redisContext`), used by one thread at a time:
/// each call writes its commands and waits for their replies (up to `timeout` seconds for each
/// read, or a blocking command's own time plus that). Any failure closes it; make a new one to
/// go on.
public final class RedisConnection {
    public let url: RedisURL
    public let timeout: Double
    /// hiredis's connection: its socket, its buffers, its reply reader. nil once closed.
    private var context: UnsafeMutablePointer<redisContext>?
    /// Why kept: the context's reader uses it for every reply, so it must outlive the context.
    private let marking: NullArrayMarking
    /// The socket's read and write timeout now (SO_RCVTIMEO, SO_SNDTIMEO), in seconds.
    private var socketTimeout: Double

    /// Connects (and authenticates and selects the database, when the URL says so).
    public init(_ url: RedisURL, timeout: Double = 2) throws(RedisError) {
        _ = Self.ignoreSIGPIPE
        // hiredis tries IPv4 addresses first and IPv6 only if there are none (so `::1` works);
        // it waits at most `timeout` for the connection, not the kernel's minutes.
        guard let context = redisConnectWithTimeout(url.host, Int32(url.port), Self.timeval(timeout)) else {
            throw .connection("\(url.host):\(url.port): out of memory")
        }
        guard context.pointee.err == 0 else {
            let message = Self.errorText(context)
            redisFree(context)
            throw .connection("\(url.host):\(url.port): \(message)")
        }
        // hiredis opens its socket without close-on-exec: programs started later do not get it.
        _ = fcntl(context.pointee.fd, F_SETFD, FD_CLOEXEC)
        self.url = url
        self.timeout = timeout
        self.context = context
        self.marking = NullArrayMarking(on: context.pointee.reader)
        self.socketTimeout = 0
        try setSocketTimeout(timeout)
        if let password = url.password {
            let auth = url.user.map { ["AUTH", $0, password] } ?? ["AUTH", password]
            _ = try command(auth)
        }
        if url.database != 0 { _ = try command(["SELECT", String(url.database)]) }
    }

    deinit { close() }

    public var isOpen: Bool { context != nil }

    public func close() {
        if let context {
            redisFree(context)
            self.context = nil
        }
    }

    /// One command; an error reply is thrown as `.server`.
    @discardableResult
    public func command(_ arguments: [String], extraWait: Double = 0) throws(RedisError) -> RESPValue {
        let reply = try pipeline([arguments.map { Array($0.utf8) }], extraWait: extraWait)[0]
        if case .error(let message) = reply { throw .server(message) }
        return reply
    }

    /// Several commands written at once; their replies in order, error replies included (a
    /// pipeline's commands do not stop at one that fails).
    public func pipeline(_ commands: [[[UInt8]]], extraWait: Double = 0) throws(RedisError) -> [RESPValue] {
        guard let context else { throw .connection("not connected") }
        do throws(RedisError) {
            try setSocketTimeout(timeout + extraWait)
            for arguments in commands { try append(arguments, to: context) }
            var replies: [RESPValue] = []
            replies.reserveCapacity(commands.count)
            for _ in commands {
                // The first call writes what was appended; each reads until its reply is whole.
                var reply: UnsafeMutableRawPointer?
                guard redisGetReply(context, &reply) == REDIS_OK, let reply else { throw failure(context) }
                replies.append(RESPValue(reply.assumingMemoryBound(to: redisReply.self)))
                freeReplyObject(reply)
            }
            return replies
        } catch {
            close()
            throw error
        }
    }

    // MARK: -

    /// Why: hiredis writes with write(2), not send(2) with MSG_NOSIGNAL, so a write to a Redis
    /// that went would end the process with SIGPIPE instead of failing with EPIPE.
    private static let ignoreSIGPIPE: Void = { _ = signal(SIGPIPE, SIG_IGN) }()

    /// Adds one command to hiredis's output buffer, binary-safe (each argument with its length).
    private func append(_ arguments: [[UInt8]], to context: UnsafeMutablePointer<redisContext>) throws(RedisError) {
        // One buffer for all the arguments (and a byte more, so that it is never empty).
        let joined = arguments.joined() + [0]
        let lengths = arguments.map(\.count)
        let rc = joined.withUnsafeBufferPointer { buffer in
            var start = 0
            var pointers: [UnsafePointer<CChar>?] = lengths.map { length in
                defer { start += length }
                return UnsafeRawPointer(buffer.baseAddress! + start).assumingMemoryBound(to: CChar.self)
            }
            return redisAppendCommandArgv(context, Int32(arguments.count), &pointers, lengths)
        }
        guard rc == REDIS_OK else { throw failure(context) }
    }

    private func setSocketTimeout(_ seconds: Double) throws(RedisError) {
        guard let context, seconds != socketTimeout else { return }
        guard redisSetTimeout(context, Self.timeval(seconds)) == REDIS_OK else { throw failure(context) }
        socketTimeout = seconds
    }

    /// What went wrong, from the context's error (read before anything else can change errno).
    private func failure(_ context: UnsafeMutablePointer<redisContext>) -> RedisError {
        let code = errno
        switch context.pointee.err {
        case REDIS_ERR_IO where code == EAGAIN || code == EWOULDBLOCK: return .connection("no answer within \(timeout) s")
        case REDIS_ERR_EOF: return .connection("closed by the server")
        case REDIS_ERR_PROTOCOL: return .protocolError(Self.errorText(context))
        default: return .connection(Self.errorText(context))
        }
    }

    private static func errorText(_ context: UnsafeMutablePointer<redisContext>) -> String {
        withUnsafeBytes(of: context.pointee.errstr) { String(decoding: $0.prefix { $0 != 0 }, as: UTF8.self) }
    }

    /// At least a millisecond: a zero timeval would mean no timeout at all.
    private static func timeval(_ seconds: Double) -> Glibc.timeval {
        let micros = max(1000, Int((seconds * 1e6).rounded()))
        return Glibc.timeval(tv_sec: micros / 1_000_000, tv_usec: micros % 1_000_000)
    }
}
