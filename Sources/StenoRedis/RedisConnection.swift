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

/// One connection to Redis over a plain TCP socket, used by one thread at a time: each call
/// writes its commands and waits for their replies (up to `timeout` seconds, or a blocking
/// command's own time plus that). Any failure closes it; make a new one to go on.
public final class RedisConnection {
    public let url: RedisURL
    public let timeout: Double
    private var fd: Int32 = -1
    private var parser = RESPParser()

    /// Connects (and authenticates and selects the database, when the URL says so).
    public init(_ url: RedisURL, timeout: Double = 2) throws(RedisError) {
        self.url = url
        self.timeout = timeout
        try open()
        if let password = url.password {
            let auth = url.user.map { ["AUTH", $0, password] } ?? ["AUTH", password]
            _ = try command(auth)
        }
        if url.database != 0 { _ = try command(["SELECT", String(url.database)]) }
    }

    deinit { close() }

    public var isOpen: Bool { fd >= 0 }

    public func close() {
        if fd >= 0 {
            Glibc.close(fd)
            fd = -1
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
        guard fd >= 0 else { throw .connection("not connected") }
        var out: [UInt8] = []
        for c in commands { out += RESPCommand.encode(bytes: c) }
        do throws(RedisError) {
            try write(out)
            var replies: [RESPValue] = []
            replies.reserveCapacity(commands.count)
            let deadline = Self.now() + timeout + extraWait
            while replies.count < commands.count {
                if let value = try nextParsed() {
                    replies.append(value)
                    continue
                }
                try read(until: deadline)
            }
            return replies
        } catch {
            close()
            throw error
        }
    }

    // MARK: -

    private func nextParsed() throws(RedisError) -> RESPValue? {
        do {
            return try parser.next()
        } catch {
            throw .protocolError(error.message)
        }
    }

    private static func now() -> Double {
        var ts = timespec()
        clock_gettime(CLOCK_MONOTONIC, &ts)
        return Double(ts.tv_sec) + Double(ts.tv_nsec) / 1e9
    }

    private func open() throws(RedisError) {
        var hints = addrinfo()
        hints.ai_family = AF_UNSPEC
        hints.ai_socktype = Int32(SOCK_STREAM.rawValue)
        var list: UnsafeMutablePointer<addrinfo>?
        let rc = getaddrinfo(url.host, String(url.port), &hints, &list)
        guard rc == 0, let first = list else {
            throw .connection("\(url.host): \(String(cString: gai_strerror(rc)))")
        }
        defer { freeaddrinfo(list) }
        var lastError = "no address"
        var entry: UnsafeMutablePointer<addrinfo>? = first
        while let a = entry {
            entry = a.pointee.ai_next
            let s = socket(a.pointee.ai_family, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
            if s < 0 { lastError = String(cString: strerror(errno)); continue }
            // Connect without blocking, waiting at most `timeout` (a blackholed address would
            // otherwise hold the thread for the kernel's minutes).
            let flags = fcntl(s, F_GETFL)
            _ = fcntl(s, F_SETFL, flags | O_NONBLOCK)
            var result = connect(s, a.pointee.ai_addr, a.pointee.ai_addrlen)
            if result != 0 && errno == EINPROGRESS {
                var p = pollfd(fd: s, events: Int16(POLLOUT), revents: 0)
                if poll(&p, 1, Int32(timeout * 1000)) == 1 {
                    var error: Int32 = 0
                    var length = socklen_t(MemoryLayout<Int32>.size)
                    getsockopt(s, SOL_SOCKET, SO_ERROR, &error, &length)
                    result = error == 0 ? 0 : -1
                    if error != 0 { errno = error }
                } else {
                    errno = ETIMEDOUT
                }
            }
            if result != 0 {
                lastError = String(cString: strerror(errno))
                Glibc.close(s)
                continue
            }
            _ = fcntl(s, F_SETFL, flags)
            var one: Int32 = 1
            setsockopt(s, Int32(IPPROTO_TCP), TCP_NODELAY, &one, socklen_t(MemoryLayout<Int32>.size))
            fd = s
            return
        }
        throw .connection("\(url.host):\(url.port): \(lastError)")
    }

    private func write(_ bytes: [UInt8]) throws(RedisError) {
        var sent = 0
        let deadline = Self.now() + timeout
        while sent < bytes.count {
            let n = bytes.withUnsafeBytes { send(fd, $0.baseAddress! + sent, $0.count - sent, Int32(MSG_NOSIGNAL)) }
            if n > 0 { sent += n; continue }
            if n < 0 && errno == EINTR { continue }
            if n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK) {
                try wait(for: Int16(POLLOUT), until: deadline)
                continue
            }
            throw .connection("write: \(String(cString: strerror(errno)))")
        }
    }

    private func wait(for events: Int16, until deadline: Double) throws(RedisError) {
        while true {
            let left = deadline - Self.now()
            guard left > 0 else { throw .connection("no answer within \(timeout) s") }
            var p = pollfd(fd: fd, events: events, revents: 0)
            let n = poll(&p, 1, Int32(max(1, left * 1000)))
            if n > 0 { return }
            if n < 0 && errno != EINTR { throw .connection("poll: \(String(cString: strerror(errno)))") }
        }
    }

    private func read(until deadline: Double) throws(RedisError) {
        try wait(for: Int16(POLLIN), until: deadline)
        var chunk = [UInt8](repeating: 0, count: 64 * 1024)
        let n = chunk.withUnsafeMutableBytes { recv(fd, $0.baseAddress, $0.count, 0) }
        if n > 0 {
            parser.append(chunk[0..<n])
            return
        }
        if n < 0 && (errno == EINTR || errno == EAGAIN) { return }
        throw .connection(n == 0 ? "closed by the server" : "read: \(String(cString: strerror(errno)))")
    }
}
