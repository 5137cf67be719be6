import StenoCore
import StenoSpeech

/// `--endpointing`, shared by `steno serve` and `steno transcribe`: what ends an utterance
/// (its final), the speech detector alone or the search's own end as well (Endpointing.swift).
/// The search ends an utterance sooner after its last word, at the cost of splitting one at a
/// long pause inside a sentence.
///
/// `steno serve` uses the search's end by default (`serverDefault`): live captions want finals
/// soon, and an utterance that ends sooner gives its shared decoder back sooner. On 2 cores
/// (bench/README.md, "Decoders, not cores") it kept 26 talkers within 1 s lag p95 (0.95 of the
/// compute bound) with finals 0.46–0.53 s p95 at every load, against 19 talkers (0.69) and
/// 0.58–0.98 s with the detector, at the same word error rate. `steno transcribe` keeps the
/// engine's default, the detector's endpoints, which are `pocketsphinx_continuous`'s.
enum EndpointingFlag {
    /// What `steno serve` ends utterances with unless told otherwise.
    static let serverDefault = Endpointing.standard

    static let help = "what ends an utterance: detector (its 0.5 s of silence) or search[=SECONDS] "
        + "(the search's best path quiet this long after its last word, default "
        + "\(Endpointing.standard.lateSilence.map(JSONWriter.secondsText) ?? "-"): finals ≈0.2 s sooner, a long pause may split a sentence)"
    /// What `steno transcribe`'s help shows as the default (the engine's).
    static var defaultText: String { text(PocketSphinxConfiguration().endpointing) }

    /// `detector`, `search`, or `search=SECONDS` (0.1–2 s): the endpointing it names, or nil
    /// when the text is none of these.
    static func endpointing(_ text: String) -> Endpointing? {
        if text == "detector" { return .detector }
        if text == "search" { return .standard }
        guard text.hasPrefix("search="), let value = Double(text.dropFirst("search=".count)),
              value.isFinite, (0.1...2).contains(value) else { return nil }
        return Endpointing(lateSilence: value)
    }

    static let expected = "detector, search, or search=SECONDS (0.1 to 2), such as search=0.3"

    /// How an endpointing is written on the command line (what `endpointing(_:)` reads).
    static func text(_ endpointing: Endpointing) -> String {
        guard let late = endpointing.lateSilence else { return "detector" }
        return late == Endpointing.standard.lateSilence ? "search" : "search=\(JSONWriter.secondsText(late))"
    }
}

extension ParsedCommandLine {
    /// `--endpointing`'s value (see `EndpointingFlag`).
    func endpointing(_ value: FlagValue) throws(UsageError) -> Endpointing {
        guard let endpointing = EndpointingFlag.endpointing(value.text) else {
            throw error(.invalidValue(source: value.source, value: value.text, expected: EndpointingFlag.expected))
        }
        return endpointing
    }
}
