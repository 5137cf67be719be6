// What `PocketSphinxRecognizer` reports of the search: volatile results, the words of the
// best path on the session's timeline (fillers left out, the session's own spellings),
// the n-best alternatives of a final, and a segment's word as spoken.

import CPocketSphinx
import StenoCore

extension PocketSphinxRecognizer {
    // MARK: - Results

    func reportVolatile(_ decoder: PocketSphinxDecoder, into events: inout [TranscriberEvent]) {
        let words = self.words(decoder, final: false)
        let text = words.map(\.text).joined(separator: " ")
        guard text != volatileText else { return }
        volatileText = text
        let result = Self.result(words)
            ?? RecognitionResult(range: TimeRange(start: seconds(fed), end: seconds(fed)), text: "")
        events.append(.volatile(result))
    }

    /// The words of the current best path (`PocketSphinxDecoder.bestPath`), fillers left
    /// out, on the timeline. Finals carry the word posterior from `ps_seg_prob` as confidence;
    /// volatiles have no posteriors yet (pocketsphinx computes them with the final lattice) and
    /// report 0, as does a final whose utterance made no lattice (see `bestPath`).
    func words(_ decoder: PocketSphinxDecoder, final: Bool) -> [Word] {
        var words: [Word] = []
        var origin: Int32?
        let earliest = seconds(utteranceStart)
        let latest = seconds(fed)
        let (first, posteriors) = decoder.bestPath(final: final)
        var segment = first
        while let current = segment {
            var startFrame: Int32 = 0
            var endFrame: Int32 = 0
            ps_seg_frames(current, &startFrame, &endFrame)
            let base = origin ?? startFrame
            origin = base
            if let raw = ps_seg_word(current), let text = display(String(cString: raw)) {
                let first = firstFrame + Int(startFrame) - Int(base)
                let last = firstFrame + Int(endFrame) - Int(base)
                let start = min(latest, max(earliest, seconds(frameStart(first))))
                let end = min(latest, max(start, seconds(frameStart(last + 1))))
                let confidence = posteriors ? decoder.probability(ps_seg_prob(current, nil, nil, nil)) : 0
                words.append(Word(text, range: TimeRange(start: start, end: end), confidence: confidence))
            }
            segment = ps_seg_next(current)  // frees the iterator at the end
        }
        return words
    }

    /// A decoder's word as the session's results name it: fillers left out, entries of the
    /// session's own by the client's spelling.
    private func display(_ raw: String) -> String? {
        if let vocabulary, let spelled = vocabulary.spelling[raw] { return spelled }
        return Self.spokenWord(raw)
    }

    /// The final's own text first (score 0), then the other n-best readings, most likely
    /// first, with their scores relative to the final's.
    func alternatives(_ decoder: PocketSphinxDecoder, finalText: String) -> [Alternative] {
        let readings = decoder.alternatives(limit: alternativesLimit + 1).compactMap { reading -> (String, Double)? in
            let text = reading.words.compactMap { display($0) }.joined(separator: " ")
            return text.isEmpty ? nil : (text, reading.score)
        }
        let reference = readings.first(where: { $0.0 == finalText })?.1 ?? readings.first?.1 ?? 0
        var result = [Alternative(text: finalText, score: 0)]
        var seen: Set<String> = [finalText]
        for (text, score) in readings where result.count < alternativesLimit && seen.insert(text).inserted {
            result.append(Alternative(text: text, score: min(0, score - reference)))
        }
        return result
    }

    static func result(_ words: [Word]) -> RecognitionResult? {
        guard let first = words.first, let last = words.last else { return nil }
        return RecognitionResult(
            range: TimeRange(start: first.range.start, end: last.range.end),
            text: words.map(\.text).joined(separator: " "),
            words: words)
    }

    /// A segment's word as spoken: nil for fillers (`<s>`, `</s>`, `<sil>`, `[NOISE]`,
    /// `++GARBAGE++` …), and without the alternate-pronunciation mark (`read(2)` → `read`).
    static func spokenWord(_ raw: String) -> String? {
        if raw.isEmpty { return nil }
        if let first = raw.first, let last = raw.last {
            if (first == "<" && last == ">") || (first == "[" && last == "]") { return nil }
            if raw.hasPrefix("++") && raw.hasSuffix("++") { return nil }
        }
        var word = Substring(raw)
        if word.last == ")", let open = word.lastIndex(of: "("),
           word[word.index(after: open)..<word.index(before: word.endIndex)].allSatisfy(\.isNumber),
           open > word.startIndex {
            word = word[..<open]
        }
        return word.isEmpty ? nil : String(word)
    }
}
