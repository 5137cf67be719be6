import CPocketSphinx
import CPocketSphinxShims
import Foundation
import StenoCore

/// One pocketsphinx decoder (`ps_decoder_t`): the acoustic and language models and the search.
/// It is lent to a session for one utterance at a time (see `DecoderPool`): the session's own
/// front end makes the cepstra, and the session's cepstral mean is put into the decoder before
/// the utterance and taken out after it, so the decoder keeps nothing of one session for the
/// next.
///
/// Ownership is exclusive: a decoder is either idle in its pool or used by exactly one
/// recognizer, which is why it can be `@unchecked Sendable` (it moves between threads but is
/// never used by two at once).
final class PocketSphinxDecoder: @unchecked Sendable {
    let ps: OpaquePointer
    private let logmath: OpaquePointer
    private let feat: UnsafeMutablePointer<feat_t>
    private let cmn: UnsafeMutablePointer<cmn_t>
    /// Samples between frames (160 at 16 kHz, 100 frames/s).
    let frameShift: Int
    /// Samples in one analysis window (410: 25.6 ms).
    let frameSize: Int
    /// Voice activity: frames kept from before the start of speech (`-vad_prespeech`).
    let preSpeechFrames: Int
    /// Consecutive speech frames that start speech (`-vad_startspeech`).
    let startSpeechFrames: Int
    /// Consecutive silence frames that end speech (`-vad_postspeech`).
    let postSpeechFrames: Int
    /// Frames of context on each side of a frame's dynamic features (3 for `1s_c_d_dd`).
    let featureWindow: Int
    /// The first pass's lag behind the phone loop (`-pl_window`, 5 frames by default): it
    /// searches frame `t` once frame `t + lookahead` is in, and at the end of an utterance the
    /// frames it lags by, but only if the utterance has at least `lookahead` frames.
    let lookahead: Int
    /// The utterance just ended had fewer frames than `lookahead`, so its first pass searched
    /// none of them: it has no words, and its lattice must not be made (see `bestPath`).
    private(set) var endedUnsearched = false
    /// The decoder's configuration after the model's feat.params were applied (retained).
    let config: OpaquePointer
    /// The cepstral mean state of a fresh decoder: where every session starts.
    let freshCMN: FeatureState

    /// The session vocabulary whose phrase model is in the language model set now (kept after
    /// its utterance until another session needs another; see PocketSphinxVocabulary.swift).
    private(set) var vocabulary: SessionVocabulary?
    /// The search's lexicon tree holds words of `vocabulary` (rebuilt when it goes out).
    private var searchChanged = false
    /// Session entries added to this decoder's dictionary (it has no removal).
    private var entriesAdded: Set<String> = []
    /// After this many session entries the pool lets the decoder go and makes a fresh one,
    /// so the dictionary does not grow without bound (≈0.5 s to make one).
    static let maxAddedEntries = 5000
    /// The layout `steno_ps_reinit_search` relies on was found (checked once, at creation).
    let canRebuildSearch: Bool
    private static let phraseModelName = "steno-session"
    private static let baseModelName = "default"

    /// Cepstra given in this utterance: where the next one falls in the ring of
    /// `2 × featureWindow + 1` that `ps_process_raw` would have filled (see `feed`).
    private var ringPosition = 0
    private(set) var utteranceStarted = false
    /// Process-wide: decoders are made and freed one at a time. ps_init writes sphinxbase
    /// globals (debug level, log callback users), and making decoders in parallel on two
    /// cores would gain nothing anyway.
    static let lifecycleLock = NSLock()
    private static let logSetup: Void = {
        steno_ps_install_log_callback()
        _ = steno_ps_set_log_file(nil)
    }()

    /// Makes a decoder from command-line style arguments. Blocking (≈0.5 s with en-us).
    init(arguments: [String]) throws(StenoError) {
        Self.lifecycleLock.lock()
        defer { Self.lifecycleLock.unlock() }
        _ = Self.logSetup
        steno_ps_clear_last_error()

        // cmd_ln_parse_r takes char *argv[]; the copies stay alive until it has parsed them
        // (this sphinxbase copies values it keeps).
        var argv: [UnsafeMutablePointer<CChar>?] = arguments.map { strdup($0) }
        defer { for pointer in argv { free(pointer) } }
        guard let config = argv.withUnsafeMutableBufferPointer({ buffer in
            cmd_ln_parse_r(nil, ps_args(), Int32(buffer.count), buffer.baseAddress, 1)
        }) else {
            throw StenoError(.internal, "pocketsphinx refused its arguments: \(Self.lastError(or: "bad arguments"))")
        }
        defer { cmd_ln_free_r(config) }  // ps_init keeps its own reference
        guard let ps = ps_init(config) else {
            throw StenoError(.internal, "pocketsphinx could not load its model: \(Self.lastError(or: "ps_init failed"))")
        }
        guard let logmath = ps_get_logmath(ps), let fe = ps_get_fe(ps),
              let feat = ps_get_feat(ps), let cmn = feat.pointee.cmn_struct,
              let decoderConfig = ps_get_config(ps)
        else {
            ps_free(ps)
            throw StenoError(.internal, "pocketsphinx decoder is missing its front end")
        }
        var shift: Int32 = 0
        var size: Int32 = 0
        fe_get_input_size(fe, &shift, &size)
        guard shift > 0, size >= shift else {
            ps_free(ps)
            throw StenoError(.internal, "pocketsphinx front end has frame shift \(shift), size \(size)")
        }
        self.ps = ps
        self.logmath = logmath
        self.feat = feat
        self.cmn = cmn
        self.frameShift = Int(shift)
        self.frameSize = Int(size)
        self.preSpeechFrames = max(0, cmd_ln_int_r(decoderConfig, "-vad_prespeech"))
        self.startSpeechFrames = max(1, cmd_ln_int_r(decoderConfig, "-vad_startspeech"))
        self.postSpeechFrames = max(1, cmd_ln_int_r(decoderConfig, "-vad_postspeech"))
        self.featureWindow = Int(max(0, feat.pointee.window_size))
        self.lookahead = Int(max(0, cmd_ln_int_r(decoderConfig, "-pl_window")))
        self.freshCMN = FeatureState(feat: feat, cmn: cmn)
        self.config = cmd_ln_retain(decoderConfig)
        self.canRebuildSearch = steno_ps_layout_ok(ps) != 0
    }

    deinit {
        Self.lifecycleLock.lock()
        ps_free(ps)
        cmd_ln_free_r(config)
        Self.lifecycleLock.unlock()
    }

    private static func lastError(or fallback: String) -> String {
        let message = String(cString: steno_ps_last_error())
        return message.isEmpty ? fallback : message
    }

    /// The decoder's logmath (shared by every model of the decoder's engine).
    var logmathPointer: OpaquePointer { logmath }

    /// Whether the pool should let it go rather than lend it again.
    var isWorn: Bool { entriesAdded.count >= Self.maxAddedEntries }

    /// The language model set of the active search.
    private var languageModelSet: OpaquePointer? {
        guard let name = ps_get_search(ps) else { return nil }
        return ps_get_lm(ps, name)
    }

    /// Every word the model's own language model knows (read once, from the first decoder).
    var languageModelWords: Set<String> {
        guard let set = languageModelSet, let base = ngram_model_set_lookup(set, Self.baseModelName),
              let counts = ngram_model_get_counts(base) else { return [] }
        var words: Set<String> = []
        let unigrams = Int32(clamping: counts[0])
        words.reserveCapacity(Int(unigrams))
        for wid in 0..<unigrams {
            if let word = ngram_word(base, wid) { words.insert(String(cString: word)) }
        }
        return words
    }

    /// Puts a session's vocabulary into the decoder (nil: none), taking out the one it held:
    /// its phrase model goes into the language model set beside the model's own, its entries
    /// into the dictionary, and the search's lexicon tree is rebuilt when either vocabulary
    /// changes which words it holds. Done between utterances.
    func use(_ next: SessionVocabulary?) throws(StenoError) {
        if vocabulary === next { return }
        guard let set = languageModelSet else {
            throw StenoError(.internal, "pocketsphinx decoder has no language model to add phrases to")
        }
        let rebuild = searchChanged || (next?.changesSearch ?? false)
        if rebuild && !canRebuildSearch {
            throw StenoError(.internal, "this pocketsphinx build's decoder layout is not the one Steno knows; phrases with new words cannot be used")
        }
        if vocabulary != nil {
            // Sane weights first: removing renormalizes the rest by 1 / (1 − its weight).
            Self.interpolate(set, [Self.baseModelName, Self.phraseModelName], [1, 0.5])
            let removed = ngram_model_set_remove(set, Self.phraseModelName, 1)
            Self.interpolate(set, [Self.baseModelName], [1])
            _ = ngram_model_set_select(set, Self.baseModelName)
            if let removed {
                Self.lifecycleLock.lock()
                ngram_model_free(removed)
                Self.lifecycleLock.unlock()
            }
            vocabulary = nil
        }
        if let next {
            Self.lifecycleLock.lock()
            _ = ngram_model_retain(next.model)
            Self.lifecycleLock.unlock()
            _ = ngram_model_set_add(set, next.model, Self.phraseModelName, 1.0, 1)
            // While the phrase model alone is selected, ps_add_word adds the entry's word to
            // it (it has it already) and not to the model's own LM.
            _ = ngram_model_set_select(set, Self.phraseModelName)
            for entry in next.entries where !entriesAdded.contains(entry.name) {
                _ = ps_add_word(ps, entry.name, entry.phones, 0)
                entriesAdded.insert(entry.name)
            }
            Self.interpolate(set, [Self.baseModelName, Self.phraseModelName], [1, next.weight])
            vocabulary = next
        }
        if rebuild {
            guard steno_ps_reinit_search(ps) >= 0 else {
                throw StenoError(.internal, "pocketsphinx could not rebuild its search for the phrases: \(Self.lastError(or: "reinit failed"))")
            }
            searchChanged = next?.changesSearch ?? false
        }
    }

    /// Issue 14's other way of making a word known, which sessions do not use (they bring a
    /// phrase model of their own, `use(_:)`); for `steno-bench phrases`. `word` becomes a
    /// unigram of the model's own language model, with the probability sphinxbase gives a new
    /// word (the uniform 1 / unigrams, whatever the word), in every later utterance on this
    /// decoder: this sphinxbase cannot take it out again. With `phones`, by `ps_add_word`
    /// (a dictionary entry and the LM word; it refuses a word the dictionary has); with none,
    /// for a word the dictionary has, by `ngram_model_add_word` on the LM set, the half of
    /// `ps_add_word` that adds to the LM. The search is rebuilt after each. Only on a decoder
    /// that holds no session vocabulary, so that the LM set holds the model's LM alone.
    func addToLanguageModel(_ word: String, phones: String?) throws(StenoError) {
        guard vocabulary == nil, !utteranceStarted, let set = languageModelSet,
              ngram_model_set_count(set) == 1 else {
            throw StenoError(.internal, "words are added to the language model only of a decoder without session phrases, between utterances")
        }
        if let phones {
            guard ps_add_word(ps, word, phones, 1) >= 0 else {
                throw StenoError(.internal, "pocketsphinx would not add \"\(word)\": \(Self.lastError(or: "ps_add_word failed"))")
            }
        } else {
            guard canRebuildSearch else {
                throw StenoError(.internal, "this pocketsphinx build's decoder layout is not the one Steno knows; its search cannot be rebuilt")
            }
            guard ngram_model_add_word(set, word, 1) >= 0, steno_ps_reinit_search(ps) >= 0 else {
                throw StenoError(.internal, "pocketsphinx would not add \"\(word)\" to its language model: \(Self.lastError(or: "ngram_model_add_word failed"))")
            }
        }
    }

    private static func interpolate(_ set: OpaquePointer, _ names: [String], _ weights: [Float]) {
        let cNames = names.map { strdup($0) }
        defer { for name in cNames { free(name) } }
        var pointers: [UnsafePointer<CChar>?] = cNames.map { UnsafePointer($0) }
        var values = weights
        _ = pointers.withUnsafeMutableBufferPointer { namesBuffer in
            values.withUnsafeMutableBufferPointer { weightsBuffer in
                ngram_model_set_interp(set, namesBuffer.baseAddress, weightsBuffer.baseAddress)
            }
        }
    }

    /// Up to `limit` distinct readings of the utterance just ended (pocketsphinx n-best over
    /// its lattice), most likely first, as raw words and their path scores (natural log).
    func alternatives(limit: Int) -> [(words: [String], score: Double)] {
        // ps_nbest makes the lattice too (see `bestPath`).
        guard limit > 0, !(endedUnsearched && !utteranceStarted) else { return [] }
        var result: [(words: [String], score: Double)] = []
        var seen: Set<[String]> = []
        var iterator = ps_nbest(ps)
        var tried = 0
        while let current = iterator, result.count < limit, tried < 50 * limit {
            guard let next = ps_nbest_next(current) else { iterator = nil; break }
            iterator = next
            tried += 1
            var score: Int32 = 0
            guard let hyp = ps_nbest_hyp(next, &score) else { continue }
            let words = String(cString: hyp).split(separator: " ").map(String.init)
            guard !words.isEmpty, seen.insert(words).inserted else { continue }
            // Path scores are in the search's units: logmath's, shifted right by SENSCR_SHIFT (10).
            result.append((words, logmath_log_to_ln(logmath, score) * Double(1 << 10)))
        }
        if let iterator { ps_nbest_free(iterator) }
        return result
    }

    /// Starts an utterance of a session whose feature state is `state` (a fresh decoder's for
    /// a session's first). `startedInSilence`: the utterance's first block brought no frames,
    /// so its features start from the context `state` keeps (see `FeatureState`); a sample
    /// that makes no frame gives the features the same empty first batch as the raw loop.
    func startUtterance(_ state: FeatureState, startedInSilence: Bool) throws(StenoError) {
        if utteranceStarted { try endSearch() }
        state.restore(feat: feat, cmn: cmn)
        // The search as a fresh decoder's, whatever this one recognized before (see the shim).
        _ = steno_ps_reset_search_hmms(ps)
        ringPosition = 0
        guard ps_start_utt(ps) >= 0 else {
            throw StenoError(.internal, "pocketsphinx could not start an utterance: \(Self.lastError(or: "ps_start_utt failed"))")
        }
        utteranceStarted = true
        endedUnsearched = false
        if startedInSilence {
            var silence: Int16 = 0
            guard ps_process_raw(ps, &silence, 1, 0, 0) >= 0 else {
                throw StenoError(.internal, "pocketsphinx failed to process audio: \(Self.lastError(or: "ps_process_raw failed"))")
            }
        }
    }

    /// Searches the cepstra one block of audio (`blockSamples`) made, in the batches
    /// `ps_process_raw` would have given the features for the same block: its front end writes
    /// into a ring of `2 × window + 1` cepstra, asked first for the frames up to the ring's end
    /// and then for the rest of its room, and each run of the ring goes to the features (and
    /// the live cepstral mean, which moves at the end of a batch) as one batch. The same
    /// batches give the same features, so the same words, frames and scores.
    func searchBlock(_ frames: inout CepstralFrames) throws(StenoError) {
        let total = frames.count
        guard total > 0 else { return }
        let ring = 2 * featureWindow + 1
        let blockStart = ringPosition % ring
        var index = 0
        var failed = false
        while index < total {
            var count = 1
            while index + count < total {
                let position = (ringPosition + count) % ring
                if position == 0 || position == blockStart { break }
                count += 1
            }
            if !process(&frames, from: index, count: count) { failed = true; break }
            index += count
            ringPosition += count
        }
        if failed {
            throw StenoError(.internal, "pocketsphinx failed to process audio: \(Self.lastError(or: "ps_process_cep failed"))")
        }
    }

    /// Ends the utterance as `ps_end_utt` does after `ps_process_raw`: `last` is the frame the
    /// front end made of its overlap buffer (nil if it made none); the features of the final
    /// frames are padded with copies of it after its mean was taken away, and the cepstral
    /// mean is updated as at the end of a raw utterance. Returns the session's feature state
    /// after it.
    func endUtterance(last: inout CepstralFrames) throws(StenoError) -> FeatureState {
        if !last.isEmpty {
            // Alone, as ps_end_utt gives it: its mean is taken away in place.
            guard process(&last, from: 0, count: 1) else {
                throw StenoError(.internal, "pocketsphinx failed to process audio: \(Self.lastError(or: "ps_process_cep failed"))")
            }
            if featureWindow > 0 {
                // The end-of-utterance copies of the normalized last frame, normalized no more.
                var pads = CepstralFrames(length: last.length)
                last.values.withUnsafeBufferPointer { row in
                    for _ in 0..<featureWindow { pads.append(UnsafeBufferPointer(rebasing: row[0..<last.length])) }
                }
                let type = feat.pointee.cmn
                feat.pointee.cmn = CMN_NONE
                let ok = process(&pads, from: 0, count: featureWindow)
                feat.pointee.cmn = type
                guard ok else {
                    throw StenoError(.internal, "pocketsphinx failed to process audio: \(Self.lastError(or: "ps_process_cep failed"))")
                }
            }
        }
        // With no frame for it, ps_end_utt updates the live mean itself (feat_update_stats),
        // as the raw path does at the end of every utterance.
        try endSearch()
        return FeatureState(feat: feat, cmn: cmn)
    }

    /// Ends an utterance its recognizer leaves unfinished (its session was cancelled while
    /// speaking), so that a decoder in the pool is never in one: the next session's vocabulary
    /// may rebuild the lexicon tree, and rebuilt under a running search it left the search's
    /// active channel lists pointing at the old tree; the next frame searched aborted the
    /// process (`eval_nonroot_chan: Assertion hmm_frame(...) == frame_idx`,
    /// ngram_search_fwdtree.c; AbandonedUtterance).
    func abandonUtterance() throws(StenoError) {
        try endSearch()
    }

    private func endSearch() throws(StenoError) {
        guard utteranceStarted else { return }
        utteranceStarted = false
        guard ps_end_utt(ps) >= 0 else {
            throw StenoError(.internal, "pocketsphinx could not end an utterance: \(Self.lastError(or: "ps_end_utt failed"))")
        }
        // ps_get_n_frames is the frames searched plus one.
        endedUnsearched = Int(ps_get_n_frames(ps)) - 1 < lookahead
    }

    /// `ps_process_cep` on frames `from ..< from + count`; the frames are changed in place
    /// (the features take the mean away in the buffer they are given).
    private func process(_ frames: inout CepstralFrames, from: Int, count: Int) -> Bool {
        frames.withRows(from: from, count: count) { rows in
            ps_process_cep(ps, rows, Int32(count), 0, 0) >= 0
        }
    }

    /// The best path's first segment (`ps_seg_iter`, freed by iterating to its end), and
    /// whether its segments carry word posteriors. `final`: of the utterance just ended, whose
    /// best path is the lattice's. When the lattice has no end to find a path to (with
    /// `-fwdflat no`, an utterance cut by `finalize` or the length limit where its last frames
    /// have no word exit), pocketsphinx gives no path at all after `ps_end_utt`, though its
    /// first pass has one; that one, the path volatile results show, is taken instead, so
    /// that the words heard are not lost. It has no posteriors.
    ///
    /// An utterance shorter than the first pass's `lookahead` (a few frames: the search's early
    /// end can leave one, Endpointing.swift, and so can options such as `-vad_startspeech 1`)
    /// has no path at all. Its lattice is not asked for: with `-fwdflat yes` the second pass
    /// searches frames the first pass never did, and pocketsphinx's lattice builder then aborts
    /// the process (`create_dag_nodes: Assertion 'ef < dag->n_frames'`, ngram_search.c; its
    /// frame count is the first pass's, its backpointers the second pass's). Measured with a
    /// C probe on a fresh decoder: 6 or 7 cepstra in an utterance (3 or 4 frames searched by
    /// the second pass) abort, 1–5 and 8 or more do not; with `-fwdflat no` none does.
    func bestPath(final: Bool) -> (first: OpaquePointer?, posteriors: Bool) {
        if final && endedUnsearched { return (nil, false) }
        if let first = ps_seg_iter(ps) { return (first, final) }
        guard final else { return (nil, false) }
        return (steno_ps_first_pass_seg_iter(ps), false)
    }

    /// The current best path as `word:first-last:posterior` items (ps_seg_iter), for tests
    /// and diagnostics.
    var segmentation: String {
        var items: [String] = []
        if endedUnsearched && !utteranceStarted { return "" }  // no lattice to make (`bestPath`)
        var segment = ps_seg_iter(ps)
        while let current = segment {
            var first: Int32 = 0
            var last: Int32 = 0
            ps_seg_frames(current, &first, &last)
            let word = ps_seg_word(current).map { String(cString: $0) } ?? "?"
            items.append("\(word):\(first)-\(last):\(ps_seg_prob(current, nil, nil, nil))")
            segment = ps_seg_next(current)
        }
        return items.joined(separator: " ")
    }

    /// A posterior probability from `ps_seg_prob` (log base of the decoder's logmath) as 0...1.
    func probability(_ logProbability: Int32) -> Double {
        let p = logmath_exp(logmath, logProbability)
        return p.isFinite ? min(1, max(0, p)) : 0
    }
}
