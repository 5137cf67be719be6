import StenoCore

/// pocketsphinx's decoders, shared by all the sessions of a process (`SharedPool`): each
/// ≈95 MB and ≈0.5 s to make, so a session's recognizer borrows one when its front end puts
/// out speech and gives it back when the utterance is final, and connected sessions cost a
/// front end, not a decoder. A decoder whose dictionary has grown with many sessions' entries
/// (`PocketSphinxDecoder.isWorn`) is let go when it comes back, and a fresh one made.
typealias DecoderPool = SharedPool<PocketSphinxDecoder>

/// A pocketsphinx recognizer's place in its pool's line.
typealias DecoderWaiter = PoolWaiter<PocketSphinxDecoder>

extension SharedPool where Resource == PocketSphinxDecoder {
    /// A pool of decoders made with `arguments`, of its own budget of `capacity` decoders, or
    /// of a budget shared with other models' pools.
    convenience init(arguments: [String], capacity: Int, budget: DecoderBudget? = nil, idleLifetime: Double = 600) {
        self.init(capacity: capacity, budget: budget, idleLifetime: idleLifetime,
                  make: { () throws(StenoError) in try PocketSphinxDecoder(arguments: arguments) },
                  isWorn: { $0.isWorn })
    }

    /// An idle decoder for `waiter`'s recognizer, or nil: it is then in line (see
    /// `SharedPool.take`). Among idle decoders it lends the one that holds `vocabulary`
    /// already, else one whose vocabulary is cheapest to take out (see `PocketSphinxDecoder.use`).
    func take(for waiter: DecoderWaiter, vocabulary: SessionVocabulary?) -> PocketSphinxDecoder? {
        take(for: waiter, preferring: [
            { $0.vocabulary === vocabulary },
            { !($0.vocabulary?.changesSearch ?? false) },
        ])
    }
}
