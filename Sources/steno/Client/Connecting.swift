import StenoCore
import StenoSystem
import StenoTransport

/// A client's connection over its reconnections: the one open now, its attempt number (an
/// event from an older attempt is stale), and the ones that ended whose threads may still be
/// tearing down (TLS too), which the process waits for before it exits under them.
///
/// It also keeps the cookies the connections were given and sends them on every later one:
/// behind a load balancer that pins a client to an instance with a cookie (HAProxy's `cookie
/// … insert`), a reconnection reaches the instance that holds its session, to resume it.
struct ConnectionSlot {
    private(set) var attempt = 0
    private(set) var client: WebSocketClient?
    private var ending: [WebSocketClient] = []
    /// `name=value` by name, the latest of each.
    private(set) var cookies: [String: String] = [:]

    /// Opens the next attempt (forgetting the old connections that have finished).
    mutating func open(_ connector: Connector, resuming session: String? = nil) {
        ending.removeAll { $0.waitUntilFinished(timeout: 0) }
        attempt += 1
        let cookie = cookies.keys.sorted().compactMap { cookies[$0] }.joined(separator: "; ")
        client = connector.open(attempt: attempt, resuming: session, cookie: cookie.isEmpty ? nil : cookie)
    }

    /// The current connection is over (closed, refused or failed).
    mutating func retire() {
        if let client {
            for pair in client.cookies {
                cookies[String(pair.prefix { $0 != "=" })] = pair
            }
            ending.append(client)
        }
        client = nil
    }

    /// At exit: drops the current connection and waits for every one to finish.
    func finish() {
        client?.disconnect()
        for old in ending { old.waitUntilFinished(timeout: 5) }
    }
}

/// Opens connections for the clients: the server's address and route, the token, the CA,
/// each connection's events posted to the inbox with the number of its attempt.
struct Connector {
    let options: ClientOptions
    let route: String
    let inbox: Inbox
    let log: Log

    /// A connection to the route; `resuming` names the session it comes back for, which the
    /// server admits even while it refuses new sessions for load.
    func open(attempt: Int, resuming session: String? = nil, cookie: String? = nil) -> WebSocketClient {
        let query = session.map { "?resume=" + $0 } ?? ""
        var configuration = WebSocketClientConfiguration(url: options.url(route + query))
        if let token = options.token { configuration.headers.append(WebSocketHeader("Authorization", "Bearer \(token)")) }
        if let cookie { configuration.headers.append(WebSocketHeader("Cookie", cookie)) }
        configuration.caFile = options.caFile
        configuration.maxMessageSize = 4 << 20
        // Pings find a server that vanished without closing (a quiet channel would never notice).
        configuration.keepAliveSeconds = 20
        // lws's own warnings are about the network, which the client reports itself.
        configuration.log = Log(minimum: log.isEnabled(.debug) ? .debug : .error, sink: { line in
            if log.isEnabled(.debug) { log.debug(line) }
        })
        let client = WebSocketClient(configuration: configuration)
        let inbox = self.inbox
        let secure = configuration.url.secure
        do {
            try client.connect { event in
                var event = event
                if secure, case .failed(let why) = event, why.lowercased().contains("ssl") || why.lowercased().contains("tls") {
                    // lws's words for a certificate that does not verify are OpenSSL's.
                    event = .failed(why + " (TLS: does the server's certificate verify? --ca FILE trusts a self-signed one)")
                }
                inbox.post(.socket(attempt: attempt, event))
            }
        } catch {
            inbox.post(.socket(attempt: attempt, .failed(error.description)))
        }
        return client
    }
}

/// What a refused or lost connection means for a client.
enum ConnectionVerdict: Equatable {
    /// Try again after this many seconds.
    case retry(after: Double, because: String)
    /// Stop with this exit code and message.
    case stop(code: Int32, message: String)
}

enum ExitCode {
    static let done: Int32 = 0
    static let inputFailed: Int32 = 1
    static let usage: Int32 = 2
    static let refused: Int32 = 3
    static let unreachable: Int32 = 4
    static let interrupted: Int32 = 130
}

extension Reconnection {
    /// What to do after a connection attempt that ended with `event` before (or instead of)
    /// a session: a refusal or a failure to connect.
    mutating func verdict(for event: WebSocketClientEvent, at now: Double, jitter: Double) -> ConnectionVerdict {
        switch event {
        case .refused(let status, let retryAfter):
            switch status {
            case 503:
                return .retry(after: busy(retryAfter: retryAfter), because: "the server is busy (503)")
            case 401:
                return .stop(code: ExitCode.refused, message: "the server refused the connection: 401 Unauthorized (a missing or wrong --token)")
            case 403:
                return .stop(code: ExitCode.refused, message: "the server refused the connection: 403 Forbidden")
            case 400..<500:
                return .stop(code: ExitCode.refused, message: "the server refused the connection: HTTP \(status)")
            default:
                return failure(at: now, jitter: jitter, "the server answered HTTP \(status)")
            }
        case .failed(let why):
            return failure(at: now, jitter: jitter, why)
        case .closed(let code, let reason, _):
            let what = code.map { "closed (\($0)\(reason.isEmpty ? "" : " \(reason)"))" } ?? "lost"
            return failure(at: now, jitter: jitter, "the connection was \(what)")
        case .opened, .message:
            return .retry(after: 0, because: "")
        }
    }

    private mutating func failure(at now: Double, jitter: Double, _ why: String) -> ConnectionVerdict {
        guard let delay = failed(at: now, jitter: jitter) else {
            return .stop(code: ExitCode.unreachable, message: "giving up: \(why), for \(JSONWriter.secondsText(giveUpAfter)) s")
        }
        return .retry(after: delay, because: why)
    }
}
