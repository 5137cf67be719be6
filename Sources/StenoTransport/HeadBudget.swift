// Connections that have not finished sending their first request head, counted per peer
// address and in all: each may hold a request-head buffer in libwebsockets (up to
// `TransportConfiguration.headBufferBytes`) until lws's 10 s header timeout, so that slow or
// silent connections (slowloris) could otherwise hold 24 KB for every descriptor the process
// may open. A new connection past either limit is refused at once.

/// The unfinished heads, by connection: a value the service thread owns, apart from lws so
/// that it is tested in memory.
struct HeadBudget {
    typealias Refusal = ConnectionRefusal

    /// Unfinished heads one address may have at once; 0: no limit.
    let perAddress: Int
    /// Unfinished heads at once in all; 0: no limit.
    let total: Int
    /// Addresses neither limit applies to, nor counted: this machine and trusted proxies
    /// (whose many clients all come from their address; a proxy such as HAProxy reads a
    /// request's head before it forwards it, and its health checks must not be refused).
    let exempt: Set<String>

    /// Accepted sockets not yet adopted by lws as connections, by descriptor.
    private var bySocket: [Int32: String] = [:]
    private var byConnection: [OpaquePointer: String] = [:]
    private var byAddress: [String: Int] = [:]

    init(perAddress: Int, total: Int, exempt: Set<String>) {
        self.perAddress = perAddress
        self.total = total
        self.exempt = Set(exempt.map(PeerAddress.normalized))
    }

    /// Unfinished heads now.
    var count: Int { bySocket.count + byConnection.count }

    /// A socket just accepted from `address`: counted, or the reason it is refused (then it is
    /// not).
    mutating func admit(socket: Int32, from address: String) -> Refusal? {
        // A socket counted but never adopted (lws failed it) has been closed, and its
        // descriptor is reused now.
        if let stale = bySocket.removeValue(forKey: socket) { release(stale) }
        let address = PeerAddress.normalized(address)
        if exempt.contains(address) { return nil }
        if total > 0 && count >= total { return .headBudget }
        if perAddress > 0 && byAddress[address, default: 0] >= perAddress { return .addressLimit }
        bySocket[socket] = address
        byAddress[address, default: 0] += 1
        return nil
    }

    /// lws made `connection` of the socket: it counts as that from now on.
    mutating func adopted(socket: Int32, as connection: OpaquePointer) {
        guard let address = bySocket.removeValue(forKey: socket) else { return }
        byConnection[connection] = address
    }

    /// The connection's head is complete (or it upgraded, or it is gone): it no longer counts.
    /// Nothing happens for one that was not counted, or no longer is.
    mutating func finished(_ connection: OpaquePointer) {
        guard let address = byConnection.removeValue(forKey: connection) else { return }
        release(address)
    }

    private mutating func release(_ address: String) {
        let left = byAddress[address, default: 1] - 1
        byAddress[address] = left > 0 ? left : nil
    }
}

/// Why the transport refused a new connection before reading anything from it.
public enum ConnectionRefusal: Equatable, Sendable {
    /// Its address already had as many unfinished request heads as one address may
    /// (`TransportConfiguration.maxUnfinishedHeadsPerAddress`): 429.
    case addressLimit
    /// All connections' unfinished request heads were at the budget
    /// (`TransportConfiguration.unfinishedHeadsMemory`): 503.
    case headBudget
}

/// Peer addresses as configuration names them and as they are compared.
public enum PeerAddress {
    /// Lowercased, an IPv4-mapped IPv6 address as its IPv4 form (a dual-stack socket's view).
    public static func normalized(_ address: String) -> String {
        let lower = address.lowercased()
        if lower.hasPrefix("::ffff:"), lower.dropFirst(7).contains(".") { return String(lower.dropFirst(7)) }
        return lower
    }
}
