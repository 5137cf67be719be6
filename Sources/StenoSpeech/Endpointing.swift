import StenoCore

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
/// The decisions are the search's own (the best path the volatile results show), at block
/// boundaries counted from the utterance's start: they do not depend on chunking or on which
/// pooled decoder searched.
///
/// The decision itself (`endsNow(silence:sentenceEndLogProbability:)`) is any engine's that
/// can tell how long its best reading has been quiet after its last word; pocketsphinx's query
/// of its best path and language model is in PocketSphinxEndpointing.swift.
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

    /// Whether speech at this point has been quiet long enough to be over: the best reading's
    /// last word ended `silence` seconds ago; `sentenceEndLogProbability`, asked only when it
    /// decides, is the log10 probability that its words end a sentence.
    public func endsNow(silence: Double, sentenceEndLogProbability: () -> Double) -> Bool {
        if let late = lateSilence, silence >= late { return true }
        if let early = earlySilence, silence >= early {
            return sentenceEndLogProbability() >= sentenceEnd
        }
        return false
    }

    /// Whether it ever ends an utterance (false: the speech detector alone does).
    public var endsUtterances: Bool { earlySilence != nil || lateSilence != nil }
}

extension Endpointing {
    /// The late silences the command line takes (`search=SECONDS`).
    public static let commandLineSilences: ClosedRange<Double> = 0.1...2

    /// As the command line writes it (`steno serve --endpointing`, which the benchmarks pass on
    /// too): `detector`, `search` (``standard``), or `search=SECONDS`, a late silence in
    /// ``commandLineSilences``; nil for anything else.
    public init?(commandLine text: String) {
        if text == "detector" {
            self = .detector
            return
        }
        if text == "search" {
            self = .standard
            return
        }
        guard text.hasPrefix("search="), let value = Double(text.dropFirst("search=".count)),
              value.isFinite, Self.commandLineSilences.contains(value) else { return nil }
        self.init(lateSilence: value)
    }

    /// How the command line writes it (what ``init(commandLine:)`` reads).
    public var commandLineText: String {
        guard let late = lateSilence else { return "detector" }
        return late == Endpointing.standard.lateSilence ? "search" : "search=\(JSONWriter.secondsText(late))"
    }
}
