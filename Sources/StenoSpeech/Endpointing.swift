import CPocketSphinx
import Foundation

/// When an utterance is over, besides the speech detector's switch.
///
/// pocketsphinx's detector ends an utterance after `-vad_postspeech` frames (0.5 s) of what it
/// counts as silence, and what it counts as speech reaches past the last word: on the
/// labelled set (`steno-bench latency`) 0.47 s p50 and 0.72 s p95 from the last word to its
/// decision. A shorter `-vad_postspeech` splits read sentences at their commas. The search
/// knows better where the words ended: its best path ends its last word and then stays in
/// silence. So after each analysis block the recognizer asks it how long its best path has
/// been quiet after its last word, and ends the utterance there (`PocketSphinxRecognizer`'s
/// `endEarly`) once that is `lateSilence` seconds, or `earlySilence` if the language model
/// finds the words a likely end of a sentence (the probability of `</s>` after the last two
/// words at least 10^`sentenceEnd`). On the labelled set the best path was quiet at most
/// 0.24 s at the commas of the read sentences and 0.37 s at any pause inside a sentence but
/// one (Beckett's 1.2 s "try again. fail again"); the language model did not tell those
/// pauses from the ends of sentences (bench/README.md, "Latency of finals"). An end comes up
/// to a block (0.128 s) after its silence.
///
/// The decisions are the search's own (the best path the partial results show), at block
/// boundaries counted from the utterance's start: they do not depend on chunking or on which
/// pooled decoder searched.
public struct Endpointing: Sendable, Hashable {
    /// Seconds of silence after the best path's last word that end the utterance when the
    /// words could end a sentence (`sentenceEnd`); nil: no such end.
    public var earlySilence: Double?
    /// The least log10 probability of `</s>` after the last two words for an `earlySilence` end.
    public var sentenceEnd: Double
    /// Seconds of silence after the best path's last word that end the utterance whatever its
    /// words; nil: no such end.
    public var lateSilence: Double?

    public init(earlySilence: Double? = nil, sentenceEnd: Double = 0, lateSilence: Double? = nil) {
        self.earlySilence = earlySilence
        self.sentenceEnd = sentenceEnd
        self.lateSilence = lateSilence
    }

    /// The speech detector alone: the endpoints of `pocketsphinx_continuous`.
    public static let detector = Endpointing()

    /// The search's end as measured (bench/README.md, "Latency of finals"; `steno serve`'s
    /// default, not the engine's: see `PocketSphinxConfiguration.endpointing`): on the labelled set, finals
    /// 0.46 s (p50) / 0.52 s (p95) after their last word instead of 0.47 / 0.72 s, and the
    /// detector's words in every final but Beckett's split at its 1.2 s pause.
    public static let standard = Endpointing(lateSilence: 0.38)

    /// Whether the utterance being searched on `decoder` ends now.
    func endsNow(_ decoder: PocketSphinxDecoder) -> Bool {
        guard earlySilence != nil || lateSilence != nil, let tail = decoder.bestPathTail() else { return false }
        let silence = Double(tail.trailingFrames * decoder.frameShift) / Double(PocketSphinxRecognizer.sampleRate)
        if let late = lateSilence, silence >= late { return true }
        if let early = earlySilence, silence >= early {
            return decoder.sentenceEndLogProbability(after: tail.words) >= sentenceEnd
        }
        return false
    }
}

extension PocketSphinxDecoder {
    /// The end of the current best path (the first pass's, as partial results read it): how
    /// many frames it has searched since the end of its last word, and its last two words,
    /// most recent first. Nil while it has no word.
    func bestPathTail() -> (trailingFrames: Int, words: [String])? {
        var words: [String] = []
        var lastWordEnd: Int32?
        var pathEnd: Int32 = -1
        var segment = ps_seg_iter(ps)
        while let current = segment {
            var first: Int32 = 0
            var last: Int32 = 0
            ps_seg_frames(current, &first, &last)
            pathEnd = max(pathEnd, last)
            if let raw = ps_seg_word(current), let word = PocketSphinxRecognizer.spokenWord(String(cString: raw)) {
                words.append(word)
                lastWordEnd = last
            }
            segment = ps_seg_next(current)  // frees the iterator at the end
        }
        guard let lastWordEnd else { return nil }
        let searched = Int32(ps_get_n_frames(ps)) - 1
        return (Int(max(pathEnd, searched) - lastWordEnd), Array(words.suffix(2).reversed()))
    }

    /// log10 of the language model's probability of `</s>` after `history` (most recent
    /// first), as the model file has it (no language weight or insertion penalty).
    func sentenceEndLogProbability(after history: [String]) -> Double {
        guard let name = ps_get_search(ps), let lm = ps_get_lm(ps, name) else { return 0 }
        let words = (["</s>"] + history).map { strdup($0) }
        defer { for word in words { free(word) } }
        var pointers: [UnsafePointer<CChar>?] = words.map { UnsafePointer($0) }
        let raw = pointers.withUnsafeMutableBufferPointer { buffer in
            ngram_prob(lm, buffer.baseAddress, Int32(buffer.count))
        }
        return logmath_log_to_log10(logmathPointer, raw)
    }
}
