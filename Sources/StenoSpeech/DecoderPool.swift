import Dispatch
import StenoCore
import StenoSystem

/// The decoders a process shares among all its sessions: at most `capacity`, each ≈95 MB and
/// ≈0.5 s to make. A session's recognizer borrows one when speech starts and gives it back
/// when the utterance is final, so connected sessions cost a front end, not a decoder.
///
/// - `take(for:)` lends an idle decoder, or puts the asking session in line (first come,
///   first served) and, while fewer than `capacity` exist, makes one in the background.
/// - `giveBack(_:)` hands the decoder to the first session in line (waking it), or keeps it
///   idle. A decoder that failed is never handed on.
/// - `keepReady(_:)`: so many idle decoders are kept ahead of demand, made now and, as they
///   are lent, again in the background (within the capacity): speech that starts finds one
///   without waiting the ≈0.5 s of making it, and the memory follows the most utterances
///   recognized at once (plus the spares) rather than the capacity. Decoders idle for
///   `idleLifetime` beyond the spares are let go (`trimIdle`, every minute once
///   `keepReady` was called): a peak's decoders serve the next peak, not the quiet after.
///
/// Thread-safe: every operation takes the pool's lock for a few instructions; making a decoder
/// happens outside it, on a background queue.
final class DecoderPool: Sendable {
    private struct State {
        /// Oldest first (lent from the end, given back at the end).
        var idle: [Idle] = []
        var lent = 0
        var making = 0
        var made = 0
        var waiting: [DecoderWaiter] = []
        var lastError: StenoError?
        /// Idle decoders kept ready (`keepReady`).
        var spares = 0
        var trimming = false
    }

    private struct Idle {
        let decoder: PocketSphinxDecoder
        /// When it was last given back (or made).
        let since: Double

        init(_ decoder: PocketSphinxDecoder) {
            self.decoder = decoder
            since = SystemClock.now()
        }
    }

    /// How long a decoder beyond the spares may stay idle before it is let go (seconds).
    let idleLifetime: Double

    /// The most decoders there will be, with the other pools of the same budget.
    var capacity: Int { budget.total }
    private let arguments: [String]
    private let budget: DecoderBudget
    private let state = Locked(State())

    /// A pool of its own budget of `capacity` decoders, or of a budget shared with other
    /// models' pools.
    init(arguments: [String], capacity: Int, budget: DecoderBudget? = nil, idleLifetime: Double = 600) {
        self.arguments = arguments
        self.idleLifetime = idleLifetime
        self.budget = budget ?? DecoderBudget(total: capacity)
        self.budget.register(self)
    }

    /// Takes in a decoder made elsewhere (the engine's first), idle. It counts against the
    /// budget even past it (an engine always has its first).
    func adopt(_ decoder: PocketSphinxDecoder) {
        budget.force()
        state.withLock { s in
            s.made += 1
            s.idle.append(Idle(decoder))
        }
    }

    /// Keeps `spares` idle decoders ready from now on (as far as the budget allows): makes
    /// them now (blocking, ≈0.5 s each), and another in the background whenever a lend leaves
    /// fewer idle or being made.
    func keepReady(_ spares: Int) throws(StenoError) {
        let (count, startTrimming) = state.withLock { s -> (Int, Bool) in
            s.spares = max(0, spares)
            defer { s.trimming = true }
            return (s.lent + s.spares, !s.trimming)
        }
        if startTrimming { scheduleTrim() }
        try prepare(count: count)
    }

    /// Lets go of the decoders idle for `idleLifetime` or more beyond the spares (their share
    /// of the budget with them).
    func trimIdle(now: Double = SystemClock.now()) {
        let freed = state.withLock { s -> [PocketSphinxDecoder] in
            var freed: [PocketSphinxDecoder] = []
            while s.idle.count > s.spares, let oldest = s.idle.first, now - oldest.since >= idleLifetime {
                freed.append(s.idle.removeFirst().decoder)
                s.made -= 1
            }
            return freed
        }
        for _ in freed { budget.release() }
    }

    private func scheduleTrim() {
        DispatchQueue.global(qos: .utility).asyncAfter(deadline: .now() + 60) { [weak self] in
            guard let self else { return }
            trimIdle()
            scheduleTrim()
        }
    }

    /// Makes decoders now (blocking, ≈0.5 s each) until `count` exist (as far as the budget
    /// allows).
    func prepare(count: Int) throws(StenoError) {
        while true {
            let wanted = state.withLock { s in s.made + s.making < count }
            guard wanted, budget.reserve() else { return }
            state.withLock { s in s.making += 1 }
            let result = make()
            deliver(result)
            if case .failure(let error) = result { throw error }
        }
    }

    /// An idle decoder for `waiter`'s recognizer, or nil: it is then in line, and its `wake`
    /// is called once a decoder is granted to it (`DecoderWaiter.take`). Among idle decoders
    /// it lends the one that holds `vocabulary` already, else one whose vocabulary is cheapest
    /// to take out (see `PocketSphinxDecoder.use`).
    func take(for waiter: DecoderWaiter, vocabulary: SessionVocabulary? = nil) -> PocketSphinxDecoder? {
        let (decoder, wantsOne) = state.withLock { s -> (PocketSphinxDecoder?, Bool) in
            if !s.idle.isEmpty {
                let index = s.idle.lastIndex(where: { $0.decoder.vocabulary === vocabulary })
                    ?? s.idle.lastIndex(where: { !($0.decoder.vocabulary?.changesSearch ?? false) })
                    ?? s.idle.count - 1
                s.lent += 1
                return (s.idle.remove(at: index).decoder, s.idle.count + s.making < s.spares)
            }
            if !s.waiting.contains(where: { $0 === waiter }) { s.waiting.append(waiter) }
            return (nil, s.making < s.waiting.count)
        }
        if decoder != nil {
            // It lent one of the spares: another, if the budget has room (no reclaim from
            // other models for a spare).
            if wantsOne && budget.reserve() { makeReserved() }
        } else if wantsOne && (budget.reserve() || budget.reclaim(for: self)) {
            makeReserved()
        }
        return decoder
    }

    /// Every decoder of the pool, lent to the caller at once (each to be given back), or nil
    /// unless the pool is full (no more will be made) and all of them are idle. For changes
    /// made to every decoder of an engine (`PocketSphinxEngine.addWordsToLanguageModel`).
    func takeEvery() -> [PocketSphinxDecoder]? {
        let capacity = self.capacity
        return state.withLock { s -> [PocketSphinxDecoder]? in
            guard s.lent == 0, s.making == 0, s.waiting.isEmpty, s.made >= capacity, s.idle.count == s.made else { return nil }
            let every = s.idle.map(\.decoder)
            s.idle = []
            s.lent = every.count
            return every
        }
    }

    /// Takes back a decoder lent out: to the first recognizer in line, or idle (and then, if
    /// another model's sessions wait for a decoder the budget has no room for, it is let go
    /// so that they get one).
    func giveBack(_ decoder: PocketSphinxDecoder) {
        if decoder.isWorn {
            // Its dictionary has grown with many sessions' entries: a fresh one replaces it.
            let makeOne = state.withLock { s -> Bool in
                s.lent -= 1
                s.made -= 1
                return s.making < s.waiting.count
            }
            if makeOne { makeReserved() } else { budget.release() }
            return
        }
        let next = state.withLock { s -> DecoderWaiter? in
            if s.waiting.isEmpty {
                s.lent -= 1
                s.idle.append(Idle(decoder))
                return nil
            }
            return s.waiting.removeFirst()
        }
        if let next {
            // A waiter that withdrew after it left the line refuses it: on to the next.
            if !next.grant(.success(decoder)) { giveBack(decoder) }
        } else {
            budget.offer(from: self)
        }
    }

    /// A decoder that failed (pocketsphinx reported an error with it) is let go, not reused;
    /// the pool may make another.
    func discard(_ decoder: PocketSphinxDecoder) {
        state.withLock { s in
            s.lent -= 1
            s.made -= 1
        }
        budget.release()
        _ = decoder
    }

    /// `waiter`'s recognizer will never want a decoder again (its session ended or failed):
    /// out of line, a decoder granted to it and not yet taken goes back, and one the pool is
    /// about to grant it (taken out of the line just before) is refused and handed on.
    func withdraw(_ waiter: DecoderWaiter) {
        state.withLock { s in s.waiting.removeAll { $0 === waiter } }
        if let decoder = waiter.withdraw() { giveBack(decoder) }
    }

    struct Stats: Sendable, Hashable {
        var capacity: Int
        var made: Int
        var idle: Int
        var lent: Int
        var waiting: Int
    }

    var stats: Stats {
        state.withLock { s in
            Stats(capacity: capacity, made: s.made, idle: s.idle.count, lent: s.lent, waiting: s.waiting.count)
        }
    }

    /// Sessions are in line for a decoder of this pool.
    var hasLine: Bool { state.withLock { !$0.waiting.isEmpty } }

    // MARK: Budget (with the other pools of a `DecoderBudget`)

    /// Sessions wait that no decoder is being made for.
    var needsDecoder: Bool { state.withLock { s in s.making < s.waiting.count } }

    /// Lets one idle decoder go (its share of the budget passes to the caller); false if none.
    func releaseIdle() -> Bool {
        let decoder = state.withLock { s -> PocketSphinxDecoder? in
            guard !s.idle.isEmpty else { return nil }
            s.made -= 1
            return s.idle.removeFirst().decoder
        }
        return decoder != nil  // freed here, outside the lock
    }

    /// Makes a decoder in the background with a share of the budget already reserved.
    func makeReserved() {
        state.withLock { s in s.making += 1 }
        DispatchQueue.global(qos: .userInitiated).async { [self] in deliver(make()) }
    }

    private func make() -> Result<PocketSphinxDecoder, StenoError> {
        do throws(StenoError) {
            return .success(try PocketSphinxDecoder(arguments: arguments))
        } catch {
            return .failure(error)
        }
    }

    /// A new decoder (or the failure to make one) goes to the first in line, or idle.
    private func deliver(_ result: Result<PocketSphinxDecoder, StenoError>) {
        if case .failure = result { budget.release() }
        let next = state.withLock { s -> (DecoderWaiter?, Result<PocketSphinxDecoder, StenoError>) in
            s.making -= 1
            switch result {
            case .success(let decoder):
                s.made += 1
                if s.waiting.isEmpty {
                    s.idle.append(Idle(decoder))
                    return (nil, result)
                }
                s.lent += 1
                return (s.waiting.removeFirst(), result)
            case .failure(let error):
                s.lastError = error
                // Nobody will make a decoder for the ones in line if none exists at all.
                guard s.made == 0, s.making == 0, !s.waiting.isEmpty else { return (nil, result) }
                return (s.waiting.removeFirst(), result)
            }
        }
        if let waiter = next.0, !waiter.grant(next.1), case .success(let decoder) = next.1 {
            giveBack(decoder)  // it withdrew meanwhile (see `withdraw`)
        }
    }
}

/// How many decoders the pools of several models (each `--model` of a server) may have
/// together: `--recognizers`, the memory (≈95 MB each) and compute limit of them all. A pool
/// that needs a decoder when the budget is spent lets an idle decoder of another pool go and
/// makes its own (≈0.5 s); a decoder given back with nobody waiting for it in its own pool is
/// let go when another pool has sessions waiting.
public final class DecoderBudget: Sendable {
    public let total: Int
    private struct State {
        var used = 0
        var pools: [Weak] = []
    }
    private struct Weak {
        weak var pool: DecoderPool?
    }
    private let state = Locked(State())

    public init(total: Int) {
        self.total = max(1, total)
    }

    /// Decoders made or being made, of every pool.
    public var used: Int { state.withLock { $0.used } }

    func register(_ pool: DecoderPool) {
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

    private func others(than pool: DecoderPool) -> [DecoderPool] {
        state.withLock { s in s.pools.compactMap(\.pool).filter { $0 !== pool } }
    }

    /// The budget is spent and `pool` needs a decoder: another pool's idle one is let go, its
    /// share passing to `pool`. False when no other pool has one idle.
    func reclaim(for pool: DecoderPool) -> Bool {
        others(than: pool).contains { $0.releaseIdle() }
    }

    /// `pool` has a decoder idle that nobody waits for: another pool whose sessions wait
    /// gets its share.
    func offer(from pool: DecoderPool) {
        guard state.withLock({ $0.pools.count > 1 && $0.used >= total }) else { return }
        if let other = others(than: pool).first(where: \.needsDecoder), pool.releaseIdle() {
            other.makeReserved()
        }
    }
}

/// A recognizer's place in the pool's line: what the pool grants it, and how it is woken.
///
/// The pool takes a waiter out of its line under its own lock and grants it the decoder after
/// (outside it); a recognizer that ends in between withdraws a waiter that is no longer in
/// line and has nothing granted yet. So a withdrawn waiter refuses later grants, and the pool
/// hands such a decoder on instead of leaving it with a recognizer that is gone (the pool
/// would count it lent for ever, one decoder fewer for everyone).
final class DecoderWaiter: Sendable {
    private struct State {
        var granted: Result<PocketSphinxDecoder, StenoError>?
        var withdrawn = false
    }
    private let wake: @Sendable () -> Void
    private let state = Locked(State())

    init(wake: @escaping @Sendable () -> Void) {
        self.wake = wake
    }

    /// From the pool, on any thread: false (and nothing kept) if the waiter has withdrawn.
    func grant(_ result: Result<PocketSphinxDecoder, StenoError>) -> Bool {
        let kept = state.withLock { s -> Bool in
            guard !s.withdrawn else { return false }
            s.granted = result
            return true
        }
        if kept { wake() }
        return kept
    }

    /// What was granted, once (nil if nothing yet).
    func take() -> Result<PocketSphinxDecoder, StenoError>? {
        state.withLock { s in
            defer { s.granted = nil }
            return s.granted
        }
    }

    /// No grant is taken from now on; a decoder granted and not taken is returned.
    fileprivate func withdraw() -> PocketSphinxDecoder? {
        state.withLock { s -> PocketSphinxDecoder? in
            s.withdrawn = true
            defer { s.granted = nil }
            if case .success(let decoder)? = s.granted { return decoder }
            return nil
        }
    }
}
