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

    /// `detector`, `search`, or `search=SECONDS` (`Endpointing.init(commandLine:)`): the
    /// endpointing it names, or nil when the text is none of these.
    static func endpointing(_ text: String) -> Endpointing? { Endpointing(commandLine: text) }

    static let expected = "detector, search, or search=SECONDS (\(JSONWriter.secondsText(Endpointing.commandLineSilences.lowerBound)) to "
        + "\(JSONWriter.secondsText(Endpointing.commandLineSilences.upperBound))), such as search=0.3"

    /// How an endpointing is written on the command line (what `endpointing(_:)` reads).
    static func text(_ endpointing: Endpointing) -> String { endpointing.commandLineText }
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
