// The bytes of WebSocket messages still being assembled (fragments, or a frame arriving in
// pieces), counted per peer address and in all. Each connection's is bounded by the message
// limit (`--max-frame-bytes`), but 10,000 connections each holding most of a message would be
// 640 MB: past either budget, the connection whose piece would go over is closed with 1013
// (try again later), and its session waits to be resumed.

/// The bytes held, by address: a value the service thread owns, tested in memory.
struct MessageBudget {
    /// Bytes all connections' unfinished messages may hold; 0: no limit.
    let total: Int
    /// Bytes one address's connections' unfinished messages may hold; 0: no limit.
    let perAddress: Int
    /// Addresses neither budget applies to (this machine, trusted proxies), normalized.
    let exempt: Set<String>

    private(set) var held = 0
    private var byAddress: [String: Int] = [:]

    init(total: Int, perAddress: Int, exempt: Set<String>) {
        self.total = total
        self.perAddress = perAddress
        self.exempt = Set(exempt.map(PeerAddress.normalized))
    }

    /// Whether a connection from `address` (normalized) may hold `more` bytes more.
    func allows(_ more: Int, from address: String) -> Bool {
        guard more > 0, !exempt.contains(address) else { return true }
        if total > 0 && held + more > total { return false }
        if perAddress > 0 && byAddress[address, default: 0] + more > perAddress { return false }
        return true
    }

    /// A connection from `address` holds `delta` bytes more (or fewer).
    mutating func change(_ delta: Int, for address: String) {
        guard delta != 0, !exempt.contains(address) else { return }
        held += delta
        let now = byAddress[address, default: 0] + delta
        byAddress[address] = now > 0 ? now : nil
    }
}
