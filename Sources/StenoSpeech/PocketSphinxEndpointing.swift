import CPocketSphinx
import Foundation

// pocketsphinx's part of `Endpointing`: how long the search's best path has been quiet after
// its last word, and what the language model says of its words ending a sentence.

extension Endpointing {
    /// Whether the utterance being searched on `decoder` ends now.
    func endsNow(_ decoder: PocketSphinxDecoder) -> Bool {
        guard endsUtterances, let tail = decoder.bestPathTail() else { return false }
        let silence = Double(tail.trailingFrames * decoder.frameShift) / Double(PocketSphinxRecognizer.sampleRate)
        return endsNow(silence: silence) { decoder.sentenceEndLogProbability(after: tail.words) }
    }
}

extension PocketSphinxDecoder {
    /// The end of the current best path (the first pass's, as volatile results read it): how
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
