import StenoSystem

/// What a `DecoderBudget` asks of the pools that share it.
protocol BudgetedPool: AnyObject, Sendable {
    /// Waiters wait that none is being made for.
    var needsDecoder: Bool { get }
    /// Lets one idle go (its share of the budget passes to the caller); false if none.
    func releaseIdle() -> Bool
    /// Makes one in the background with a share of the budget already reserved.
    func makeReserved()
}

/// How many decoders the pools of several models (each `--model` of a server) may have
/// together: `--recognizers`, the memory (pocketsphinx: ≈95 MB each) and compute limit of them
/// all. A pool that needs a decoder when the budget is spent lets an idle decoder of another
/// pool go and makes its own (pocketsphinx: ≈0.5 s); a decoder given back with nobody waiting
/// for it in its own pool is let go when another pool has sessions waiting.
public final class DecoderBudget: Sendable {
    public let total: Int
    private struct State {
        var used = 0
        var pools: [Weak] = []
    }
    private struct Weak {
        weak var pool: (any BudgetedPool)?
    }
    private let state = Locked(State())

    public init(total: Int) {
        self.total = max(1, total)
    }

    /// Decoders made or being made, of every pool.
    public var used: Int { state.withLock { $0.used } }

    func register(_ pool: any BudgetedPool) {
        state.withLock { s in
            s.pools.removeAll { $0.pool == nil }
            s.pools.append(Weak(pool: pool))
        }
    }

    /// One more decoder may be made (it counts until released).
    func reserve() -> Bool {
        state.withLock { s in
            guard s.used < total else { return false }
            s.used += 1
            return true
        }
    }

    /// Counts a decoder made whatever the budget says (an engine's first).
    func force() { state.withLock { $0.used += 1 } }

    func release() { state.withLock { $0.used -= 1 } }

    private func others(than pool: any BudgetedPool) -> [any BudgetedPool] {
        state.withLock { s in s.pools.compactMap(\.pool).filter { $0 !== pool } }
    }

    /// The budget is spent and `pool` needs a decoder: another pool's idle one is let go, its
    /// share passing to `pool`. False when no other pool has one idle.
    func reclaim(for pool: any BudgetedPool) -> Bool {
        others(than: pool).contains { $0.releaseIdle() }
    }

    /// `pool` has a decoder idle that nobody waits for: another pool whose sessions wait
    /// gets its share.
    func offer(from pool: any BudgetedPool) {
        guard state.withLock({ $0.pools.count > 1 && $0.used >= total }) else { return }
        if let other = others(than: pool).first(where: \.needsDecoder), pool.releaseIdle() {
            other.makeReserved()
        }
    }
}
