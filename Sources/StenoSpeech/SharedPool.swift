import Dispatch
import StenoCore
import StenoSystem

/// Decoders (or whatever an engine's recognizers need one of at a time, and is costly to make)
/// shared by all the sessions of a process: at most `capacity` of them. A session's recognizer
/// borrows one when it has something to recognize and gives it back when it is done, so
/// connected sessions cost nothing of it while they are quiet. Engine-neutral: pocketsphinx's
/// decoders are one use (`DecoderPool`), the tests' scripted engine another.
///
/// - `take(for:)` lends an idle one, or puts the asking recognizer's waiter in line (first
///   come, first served) and, while fewer than `capacity` exist, makes one in the background.
/// - `giveBack(_:)` hands it to the first waiter in line (waking it), or keeps it idle. One
///   that failed (`discard`) is never handed on; one worn out (`isWorn`) is replaced.
/// - `keepReady(_:)`: so many idle ones are kept ahead of demand, made now and, as they are
///   lent, again in the background (within the capacity): a recognizer finds one without
///   waiting for it to be made, and the memory follows the most lent at once (plus the
///   spares) rather than the capacity. Those idle for `idleLifetime` beyond the spares are let
///   go (`trimIdle`, every minute once `keepReady` was called): a peak's serve the next peak,
///   not the quiet after.
/// - The capacity is a `DecoderBudget`'s, which pools of several models may share.
///
/// Thread-safe: every operation takes the pool's lock for a few instructions; making one
/// happens outside it, on a background queue.
public final class SharedPool<Resource: AnyObject & Sendable>: Sendable {
    fileprivate struct State {
        /// Oldest first (lent from the end, given back at the end).
        var idle: [Idle] = []
        var lent = 0
        /// Which are lent now: one is lent to one recognizer at a time, checked on every lend
        /// and every return (a decoder searched by two sessions at once corrupts pocketsphinx's
        /// search and aborts the process).
        var out: Set<ObjectIdentifier> = []
        /// Returns of one that was not lent (given back twice, or never taken), refused.
        var strayReturns = 0
        var making = 0
        var made = 0
        var waiting: [PoolWaiter<Resource>] = []
        var lastError: StenoError?
        /// Idle ones kept ready (`keepReady`).
        var spares = 0
        var trimming = false
    }

    fileprivate struct Idle {
        let resource: Resource
        /// When it was last given back (or made).
        let since: Double

        init(_ resource: Resource) {
            self.resource = resource
            since = SystemClock.now()
        }
    }

    /// How long one beyond the spares may stay idle before it is let go (seconds).
    public let idleLifetime: Double

    /// The most there will be, with the other pools of the same budget.
    public var capacity: Int { budget.total }
    private let budget: DecoderBudget
    private let make: @Sendable () throws(StenoError) -> Resource
    private let isWorn: @Sendable (Resource) -> Bool
    private let state = Locked(State())

    /// A pool of its own budget of `capacity`, or of a budget shared with other pools.
    /// `make`: a new one (blocking; called on the caller's thread or a background queue);
    /// `isWorn`: whether one given back should be let go and replaced rather than lent again.
    public init(capacity: Int, budget: DecoderBudget? = nil, idleLifetime: Double = 600,
                make: @escaping @Sendable () throws(StenoError) -> Resource,
                isWorn: @escaping @Sendable (Resource) -> Bool = { _ in false }) {
        self.idleLifetime = idleLifetime
        self.make = make
        self.isWorn = isWorn
        self.budget = budget ?? DecoderBudget(total: capacity)
        self.budget.register(self)
    }

    /// Takes in one made elsewhere (an engine's first), idle. It counts against the budget
    /// even past it (an engine always has its first).
    public func adopt(_ resource: Resource) {
        budget.force()
        state.withLock { s in
            s.made += 1
            s.idle.append(Idle(resource))
        }
    }

    /// Keeps `spares` idle ones ready from now on (as far as the budget allows): makes them
    /// now (blocking), and another in the background whenever a lend leaves fewer idle or
    /// being made.
    public func keepReady(_ spares: Int) throws(StenoError) {
        let (count, startTrimming) = state.withLock { s -> (Int, Bool) in
            s.spares = max(0, spares)
            defer { s.trimming = true }
            return (s.lent + s.spares, !s.trimming)
        }
        if startTrimming { scheduleTrim() }
        try prepare(count: count)
    }

    /// Lets go of those idle for `idleLifetime` or more beyond the spares (their share of the
    /// budget with them).
    public func trimIdle(now: Double = SystemClock.now()) {
        let freed = state.withLock { s -> [Resource] in
            var freed: [Resource] = []
            while s.idle.count > s.spares, let oldest = s.idle.first, now - oldest.since >= idleLifetime {
                freed.append(s.idle.removeFirst().resource)
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

    /// Makes them now (blocking) until `count` exist (as far as the budget allows).
    public func prepare(count: Int) throws(StenoError) {
        while true {
            let wanted = state.withLock { s in s.made + s.making < count }
            guard wanted, budget.reserve() else { return }
            state.withLock { s in s.making += 1 }
            let result = makeOne()
            deliver(result)
            if case .failure(let error) = result { throw error }
        }
    }

    /// An idle one for `waiter`'s recognizer, or nil: it is then in line, and its `wake` is
    /// called once one is granted to it (`PoolWaiter.take`). Among idle ones it lends the most
    /// recently given back that the first of `preferring` accepts, else that the next one
    /// accepts, and so on, else the most recently given back.
    public func take(for waiter: PoolWaiter<Resource>, preferring: [(Resource) -> Bool] = []) -> Resource? {
        let (resource, wantsOne) = state.withLock { s -> (Resource?, Bool) in
            if !s.idle.isEmpty {
                var index = s.idle.count - 1
                for accepts in preferring {
                    if let found = s.idle.lastIndex(where: { accepts($0.resource) }) {
                        index = found
                        break
                    }
                }
                s.lent += 1
                let resource = s.idle.remove(at: index).resource
                s.out.insert(ObjectIdentifier(resource))
                return (resource, s.idle.count + s.making < s.spares)
            }
            if !s.waiting.contains(where: { $0 === waiter }) { s.waiting.append(waiter) }
            return (nil, s.making < s.waiting.count)
        }
        if resource != nil {
            // It lent one of the spares: another, if the budget has room (no reclaim from
            // other pools for a spare).
            if wantsOne && budget.reserve() { makeReserved() }
        } else if wantsOne && (budget.reserve() || budget.reclaim(for: self)) {
            makeReserved()
        }
        return resource
    }

    /// Every one of the pool, lent to the caller at once (each to be given back), or nil
    /// unless the pool is full (no more will be made) and all of them are idle. For changes
    /// made to all of them (`PocketSphinxEngine.addWordsToLanguageModel`).
    public func takeEvery() -> [Resource]? {
        let capacity = self.capacity
        return state.withLock { s -> [Resource]? in
            guard s.lent == 0, s.making == 0, s.waiting.isEmpty, s.made >= capacity, s.idle.count == s.made else { return nil }
            let every = s.idle.map(\.resource)
            s.idle = []
            s.lent = every.count
            s.out = Set(every.map(ObjectIdentifier.init))
            return every
        }
    }

    /// Takes back one lent out: to the first waiter in line, or idle (and then, if another
    /// pool of the budget has waiters the budget has no room for, it is let go so that they
    /// get one).
    public func giveBack(_ resource: Resource) {
        guard state.withLock({ s in s.takeBack(resource) }) else { return }
        if isWorn(resource) {
            // Worn out (pocketsphinx: its dictionary has grown with many sessions' entries):
            // a fresh one replaces it.
            let makeOne = state.withLock { s -> Bool in
                s.lent -= 1
                s.made -= 1
                return s.making < s.waiting.count
            }
            if makeOne { makeReserved() } else { budget.release() }
            return
        }
        hand(resource)
    }

    /// One taken back (or made for the line): to the first waiter in line, or idle.
    private func hand(_ resource: Resource) {
        let next = state.withLock { s -> PoolWaiter<Resource>? in
            if s.waiting.isEmpty {
                s.lent -= 1
                s.idle.append(Idle(resource))
                return nil
            }
            s.out.insert(ObjectIdentifier(resource))
            return s.waiting.removeFirst()
        }
        if let next {
            // A waiter that withdrew after it left the line refuses it: on to the next.
            if !next.grant(.success(resource)), state.withLock({ s in s.takeBack(resource) }) { hand(resource) }
        } else {
            budget.offer(from: self)
        }
    }

    /// One that failed (its engine reported an error with it) is let go, not reused; the pool
    /// may make another.
    public func discard(_ resource: Resource) {
        guard state.withLock({ s in
            guard s.takeBack(resource) else { return false }
            s.lent -= 1
            s.made -= 1
            return true
        }) else { return }
        budget.release()
        _ = resource
    }

    /// `waiter`'s recognizer will never want one again (its session ended or failed): out of
    /// line, one granted to it and not yet taken goes back, and one the pool is about to grant
    /// it (taken out of the line just before) is refused and handed on.
    public func withdraw(_ waiter: PoolWaiter<Resource>) {
        state.withLock { s in s.waiting.removeAll { $0 === waiter } }
        if let resource = waiter.withdraw() { giveBack(resource) }
    }

    public typealias Stats = DecoderStats

    public var stats: Stats {
        state.withLock { s in
            Stats(capacity: capacity, made: s.made, idle: s.idle.count, lent: s.lent, waiting: s.waiting.count,
                  strayReturns: s.strayReturns)
        }
    }

    /// Waiters are in line for one of this pool.
    public var hasLine: Bool { state.withLock { !$0.waiting.isEmpty } }

    private func makeOne() -> Result<Resource, StenoError> {
        do throws(StenoError) {
            return .success(try make())
        } catch {
            return .failure(error)
        }
    }

    /// A new one (or the failure to make one) goes to the first in line, or idle.
    private func deliver(_ result: Result<Resource, StenoError>) {
        if case .failure = result { budget.release() }
        let next = state.withLock { s -> (PoolWaiter<Resource>?, Result<Resource, StenoError>) in
            s.making -= 1
            switch result {
            case .success(let resource):
                s.made += 1
                if s.waiting.isEmpty {
                    s.idle.append(Idle(resource))
                    return (nil, result)
                }
                s.lent += 1
                s.out.insert(ObjectIdentifier(resource))
                return (s.waiting.removeFirst(), result)
            case .failure(let error):
                s.lastError = error
                // Nobody will make one for those in line if none exists at all.
                guard s.made == 0, s.making == 0, !s.waiting.isEmpty else { return (nil, result) }
                return (s.waiting.removeFirst(), result)
            }
        }
        if let waiter = next.0, !waiter.grant(next.1), case .success(let resource) = next.1 {
            giveBack(resource)  // it withdrew meanwhile (see `withdraw`)
        }
    }
}

extension SharedPool.State {
    /// `resource` comes back from a recognizer: true if it was lent; a stray return (given back
    /// twice, or never lent) is counted and refused, so that the pool never holds it twice.
    fileprivate mutating func takeBack(_ resource: Resource) -> Bool {
        guard out.remove(ObjectIdentifier(resource)) != nil else {
            strayReturns += 1
            return false
        }
        return true
    }
}

extension SharedPool: BudgetedPool {
    /// Waiters wait that none is being made for.
    var needsDecoder: Bool { state.withLock { s in s.making < s.waiting.count } }

    /// Lets one idle go (its share of the budget passes to the caller); false if none.
    func releaseIdle() -> Bool {
        let resource = state.withLock { s -> Resource? in
            guard !s.idle.isEmpty else { return nil }
            s.made -= 1
            return s.idle.removeFirst().resource
        }
        return resource != nil  // freed here, outside the lock
    }

    /// Makes one in the background with a share of the budget already reserved.
    func makeReserved() {
        state.withLock { s in s.making += 1 }
        DispatchQueue.global(qos: .userInitiated).async { [self] in deliver(makeOne()) }
    }
}

/// A `SharedPool` at one moment: what an engine's shared decoders are doing.
public struct DecoderStats: Sendable, Hashable {
    /// The most there will be (`recognizers`).
    public var capacity: Int
    public var made: Int
    public var idle: Int
    /// Lent to a session for its utterance in progress.
    public var lent: Int
    /// Sessions with speech to search that wait for one.
    public var waiting: Int
    /// Returns refused because what came back was not lent (a bug elsewhere, made harmless).
    public var strayReturns: Int = 0
}

/// A recognizer's place in a `SharedPool`'s line: what the pool grants it, and how it is woken.
///
/// The pool takes a waiter out of its line under its own lock and grants it after (outside
/// it); a recognizer that ends in between withdraws a waiter that is no longer in line and has
/// nothing granted yet. So a withdrawn waiter refuses later grants, and the pool hands such a
/// grant on instead of leaving it with a recognizer that is gone (the pool would count it lent
/// for ever, one fewer for everyone).
public final class PoolWaiter<Resource: Sendable>: Sendable {
    private let mailbox: Mailbox<Result<Resource, StenoError>>

    public init(wake: @escaping @Sendable () -> Void) {
        mailbox = Mailbox(wake: wake)
    }

    /// From the pool, on any thread: false (and nothing kept) if the waiter has withdrawn.
    public func grant(_ result: Result<Resource, StenoError>) -> Bool {
        mailbox.post(result)
    }

    /// What was granted, once (nil if nothing yet).
    public func take() -> Result<Resource, StenoError>? {
        mailbox.collect().first
    }

    /// No grant is taken from now on; one granted and not taken is returned.
    fileprivate func withdraw() -> Resource? {
        if case .success(let resource)? = mailbox.close().first { return resource }
        return nil
    }
}
