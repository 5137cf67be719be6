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
///
/// Thread-safe: every operation takes the pool's lock for a few instructions; making a decoder
/// happens outside it, on a background queue.
final class DecoderPool: Sendable {
    private struct State {
        var idle: [PocketSphinxDecoder] = []
        var lent = 0
        var making = 0
        var made = 0
        var waiting: [DecoderWaiter] = []
        var lastError: StenoError?
    }

    /// The most decoders there will be.
    let capacity: Int
    private let arguments: [String]
    private let state = Locked(State())

    init(arguments: [String], capacity: Int) {
        self.arguments = arguments
        self.capacity = max(1, capacity)
    }

    /// Takes in a decoder made elsewhere (the engine's first), idle.
    func adopt(_ decoder: PocketSphinxDecoder) {
        state.withLock { s in
            s.made += 1
            s.idle.append(decoder)
        }
    }

    /// Makes decoders now (blocking, ≈0.5 s each) until `count` exist (at most `capacity`).
    func prepare(count: Int) throws(StenoError) {
        while true {
            let go = state.withLock { s -> Bool in
                guard s.made + s.making < min(count, capacity) else { return false }
                s.making += 1
                return true
            }
            guard go else { return }
            let result = make()
            deliver(result)
            if case .failure(let error) = result { throw error }
        }
    }

    /// An idle decoder for `waiter`'s recognizer, or nil: it is then in line, and its `wake`
    /// is called once a decoder is granted to it (`DecoderWaiter.take`).
    /// Among idle decoders it lends the one that holds `vocabulary` already, else one whose
    /// vocabulary is cheapest to take out (see `PocketSphinxDecoder.use`).
    func take(for waiter: DecoderWaiter, vocabulary: SessionVocabulary? = nil) -> PocketSphinxDecoder? {
        let (decoder, makeOne) = state.withLock { s -> (PocketSphinxDecoder?, Bool) in
            if !s.idle.isEmpty {
                let index = s.idle.lastIndex(where: { $0.vocabulary === vocabulary })
                    ?? s.idle.lastIndex(where: { !($0.vocabulary?.changesSearch ?? false) })
                    ?? s.idle.count - 1
                s.lent += 1
                return (s.idle.remove(at: index), false)
            }
            if !s.waiting.contains(where: { $0 === waiter }) { s.waiting.append(waiter) }
            guard s.made + s.making < capacity else { return (nil, false) }
            s.making += 1
            return (nil, true)
        }
        if makeOne {
            DispatchQueue.global(qos: .userInitiated).async { [self] in deliver(make()) }
        }
        return decoder
    }

    /// Takes back a decoder lent out: to the first recognizer in line, or idle.
    func giveBack(_ decoder: PocketSphinxDecoder) {
        if decoder.isWorn {
            // Its dictionary has grown with many sessions' entries: a fresh one replaces it.
            let makeOne = state.withLock { s -> Bool in
                s.lent -= 1
                s.made -= 1
                guard !s.waiting.isEmpty, s.made + s.making < capacity else { return false }
                s.making += 1
                return true
            }
            if makeOne { DispatchQueue.global(qos: .userInitiated).async { [self] in deliver(make()) } }
            return
        }
        let next = state.withLock { s -> DecoderWaiter? in
            if s.waiting.isEmpty {
                s.lent -= 1
                s.idle.append(decoder)
                return nil
            }
            return s.waiting.removeFirst()
        }
        next?.grant(.success(decoder))
    }

    /// A decoder that failed (pocketsphinx reported an error with it) is let go, not reused;
    /// the pool may make another.
    func discard(_ decoder: PocketSphinxDecoder) {
        state.withLock { s in
            s.lent -= 1
            s.made -= 1
        }
        _ = decoder
    }

    /// `waiter`'s recognizer no longer wants a decoder (its session was cancelled): out of
    /// line, and a decoder granted to it and not yet taken goes back.
    func withdraw(_ waiter: DecoderWaiter) {
        state.withLock { s in s.waiting.removeAll { $0 === waiter } }
        if let decoder = waiter.takeGranted() { giveBack(decoder) }
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

    private func make() -> Result<PocketSphinxDecoder, StenoError> {
        do throws(StenoError) {
            return .success(try PocketSphinxDecoder(arguments: arguments))
        } catch {
            return .failure(error)
        }
    }

    /// A new decoder (or the failure to make one) goes to the first in line, or idle.
    private func deliver(_ result: Result<PocketSphinxDecoder, StenoError>) {
        let next = state.withLock { s -> (DecoderWaiter?, Result<PocketSphinxDecoder, StenoError>) in
            s.making -= 1
            switch result {
            case .success(let decoder):
                s.made += 1
                if s.waiting.isEmpty {
                    s.idle.append(decoder)
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
        next.0?.grant(next.1)
    }
}

/// A recognizer's place in the pool's line: what the pool grants it, and how it is woken.
final class DecoderWaiter: Sendable {
    private let wake: @Sendable () -> Void
    private let granted = Locked<Result<PocketSphinxDecoder, StenoError>?>(nil)

    init(wake: @escaping @Sendable () -> Void) {
        self.wake = wake
    }

    /// From the pool, on any thread.
    func grant(_ result: Result<PocketSphinxDecoder, StenoError>) {
        granted.withLock { $0 = result }
        wake()
    }

    /// What was granted, once (nil if nothing yet).
    func take() -> Result<PocketSphinxDecoder, StenoError>? {
        granted.withLock { value in
            defer { value = nil }
            return value
        }
    }

    fileprivate func takeGranted() -> PocketSphinxDecoder? {
        if case .success(let decoder)? = take() { return decoder }
        return nil
    }
}
