import StenoCore

/// How to run pocketsphinx: where the model is, decoder options, and streaming policy.
public struct PocketSphinxConfiguration: Sendable, Hashable {
    /// The model directory in Debian's `pocketsphinx-en-us` layout: an acoustic model folder
    /// named like the directory's last component (`en-us/`), `<name>.lm.bin` and
    /// `cmudict-<name>.dict`. The three paths below override the parts one by one.
    public var modelDirectory: String
    /// Acoustic model folder (`-hmm`); default `<modelDirectory>/<name>`.
    public var acousticModel: String?
    /// Language model (`-lm`); default `<modelDirectory>/<name>.lm.bin`.
    public var languageModel: String?
    /// Pronunciation dictionary (`-dict`); default `<modelDirectory>/cmudict-<name>.dict`.
    public var dictionary: String?
    /// The language the model recognizes (BCP 47), reported in `SpeechEngineInfo`.
    public var language: String

    /// More decoder arguments, as on pocketsphinx's command line, e.g.
    /// `["-maxhmmpf", "3000", "-maxwpf", "10"]`. They come after the model paths. Each option
    /// may be given once: pocketsphinx refuses a repeated one, so to change one of
    /// `recommendedArguments` replace its value in the list (`arguments(setting:)`, as
    /// `steno --decoder` does) rather than appending it again. `-logfn` and `-samprate` are refused: logging is
    /// process-wide (`PocketSphinxEngine.setLogFile`) and the rate is fixed at 16 kHz.
    /// Default: `recommendedArguments`; `[]` gives pocketsphinx's own defaults (those of
    /// `pocketsphinx_continuous`).
    public var arguments: [String]

    /// The default search: at most 5000 active HMMs and 20 word exits per frame
    /// (pocketsphinx's defaults: 30000 and no limit), and no second, flat-lexicon pass
    /// (`-fwdflat no`; the lattice, its best path and the word posteriors are still made).
    ///
    /// Measured (`steno-bench speech --only options`, 25 files with references, 215 words,
    /// fresh session per file, 2026-12-01): 102 word errors against 108 with the second pass
    /// (fewer or equal in every group), RTF 0.263 against 0.351 on a quiet machine, and the
    /// end of an utterance (`ps_end_utt`, lattice, posteriors) 30 / 97 ms p50 / p95 against
    /// 192 / 445 ms: the second pass runs over the whole utterance once it has ended, so it is
    /// what a final waited for. Confidences stay useful (AUC 0.71 against 0.73). Tighter,
    /// `-maxhmmpf 3000 -maxwpf 10` makes 13 errors more; `-bestpath no` makes every
    /// confidence alike. Without the second pass a `finalize` in mid-word has no lattice:
    /// the recognizer then falls back to the first pass's path (confidence 0).
    public static let recommendedArguments = ["-maxhmmpf", "5000", "-maxwpf", "20", "-fwdflat", "no"]

    /// `base` with `changes`'s `-name value` pairs: one naming an option `base` already sets
    /// replaces its value in place (pocketsphinx refuses an option given twice), the others
    /// follow in their order. The last of several pairs with one name wins; a name without a
    /// value at the end of `changes` is passed over.
    public static func arguments(_ base: [String] = recommendedArguments, setting changes: [String]) -> [String] {
        var result = base
        for index in stride(from: 0, to: changes.count - 1, by: 2) {
            let (name, value) = (changes[index], changes[index + 1])
            if let at = stride(from: 0, to: result.count - 1, by: 2).first(where: { result[$0] == name }) {
                result[at + 1] = value
            } else {
                result += [name, value]
            }
        }
        return result
    }

    /// An utterance longer than this (seconds, counted from the start of its speech) is
    /// finalized at the next block boundary even while speech goes on.
    public var maxUtteranceSeconds: Double

    /// Endpointing block, in samples: voice activity is checked, volatile results made and
    /// utterances ended only at the end of each block, counted from the start of the
    /// utterance. 2048 (128 ms) is what `pocketsphinx_continuous -infile` reads at a time, and
    /// with it the finals are the CLI's words exactly. Must be 160...16000.
    public var blockSamples: Int

    /// The most decoders the engine makes (each ≈95 MB, ≈0.5 s to make): how many utterances,
    /// of all sessions together, can be recognized at once. Sessions borrow one per utterance.
    public var recognizers: Int
    /// Decoders made when the engine starts (at least one is); the rest are made on demand.
    public var preparedRecognizers: Int

    /// When an utterance ends besides the speech detector's own decision (Endpointing.swift).
    /// `.detector` (the detector's alone, `pocketsphinx_continuous`'s endpoints) by default;
    /// `.standard` ends it when the search's best path has been quiet 0.38 s after its last
    /// word. Measured in process (`steno-bench latency --offline-only --endpoint detector
    /// --endpoint late=0.38`, 2026-12-02): silence from the last word to the decision 0.464 /
    /// 0.516 s p50 / p95 instead of 0.474 / 0.720, the same words in every LibriVox, card and
    /// TTS final, Beckett's 1.2 s pause split (9 → 11 errors of 12). The pocketsphinx abort
    /// it once led to (`create_dag_nodes`, with `-fwdflat yes`) is fixed
    /// (`PocketSphinxDecoder.bestPath`). The engine's default stays the detector's (the CLI's
    /// utterances, which `steno transcribe` and the equivalence tests rely on); `steno serve`
    /// chooses `.standard` (see its `EndpointingFlag.serverDefault`: measured under load).
    public var endpointing: Endpointing = .detector

    public static let debianModelDirectory = "/usr/share/pocketsphinx/model/en-us"

    public init(
        modelDirectory: String = PocketSphinxConfiguration.debianModelDirectory,
        acousticModel: String? = nil,
        languageModel: String? = nil,
        dictionary: String? = nil,
        language: String = "en-US",
        arguments: [String] = PocketSphinxConfiguration.recommendedArguments,
        maxUtteranceSeconds: Double = 15,
        blockSamples: Int = 2048,
        recognizers: Int = 4,
        preparedRecognizers: Int = 1
    ) {
        self.modelDirectory = modelDirectory
        self.acousticModel = acousticModel
        self.languageModel = languageModel
        self.dictionary = dictionary
        self.language = language
        self.arguments = arguments
        self.maxUtteranceSeconds = maxUtteranceSeconds
        self.blockSamples = blockSamples
        self.recognizers = recognizers
        self.preparedRecognizers = preparedRecognizers
    }

    /// The model's name as sessions choose it; nil: the last component of `modelDirectory`.
    public var name: String?

    /// The model's name: `name`, else the last component of `modelDirectory` ("en-us").
    public var modelName: String { name ?? directoryName }

    /// The last component of `modelDirectory`: what the Debian layout names its files by.
    private var directoryName: String {
        let trimmed = modelDirectory.hasSuffix("/") ? String(modelDirectory.dropLast()) : modelDirectory
        return trimmed.split(separator: "/").last.map(String.init) ?? trimmed
    }

    public var resolvedAcousticModel: String { acousticModel ?? "\(directory)/\(directoryName)" }
    public var resolvedLanguageModel: String { languageModel ?? "\(directory)/\(directoryName).lm.bin" }
    public var resolvedDictionary: String { dictionary ?? "\(directory)/cmudict-\(directoryName).dict" }

    private var directory: String {
        modelDirectory.hasSuffix("/") ? String(modelDirectory.dropLast()) : modelDirectory
    }

    /// A model as `steno serve --model` names it: `DIR` (a directory in the Debian layout,
    /// named by its last component, as before), or `NAME=DIR`; either followed by
    /// comma-separated parts that replace the directory's: `lm=FILE`, `dict=FILE`, `hmm=DIR`,
    /// `language=TAG`. E.g. `--model legal=/usr/share/pocketsphinx/model/en-us,lm=/srv/legal.lm.bin`
    /// serves the English acoustic model with another language model, named "legal". Other
    /// settings come from `base`.
    public init(modelSpec: String, base: PocketSphinxConfiguration = PocketSphinxConfiguration()) throws(StenoError) {
        self = base
        var parts = modelSpec.split(separator: ",", omittingEmptySubsequences: false).map(String.init)
        var head = parts.removeFirst()
        name = nil
        acousticModel = nil
        languageModel = nil
        dictionary = nil
        if let equals = head.firstIndex(of: "="), !head[..<equals].contains("/") {
            let given = String(head[..<equals])
            guard (1...64).contains(given.utf8.count),
                  given.allSatisfy({ $0.isASCII && ($0.isLetter || $0.isNumber || "-_.".contains($0)) }) else {
                throw StenoError(.internal, "a model name is 1-64 letters, digits, '-', '_' or '.': \"\(given)\"")
            }
            name = given
            head = String(head[head.index(after: equals)...])
        }
        guard !head.isEmpty else { throw StenoError(.internal, "the model \"\(modelSpec)\" names no directory") }
        modelDirectory = head
        for part in parts {
            guard let equals = part.firstIndex(of: "=") else {
                throw StenoError(.internal, "\"\(part)\" in --model \(modelSpec): expected lm=FILE, dict=FILE, hmm=DIR or language=TAG")
            }
            let key = part[..<equals]
            let value = String(part[part.index(after: equals)...])
            guard !value.isEmpty else { throw StenoError(.internal, "\(key)= in --model \(modelSpec) has no value") }
            switch key {
            case "lm": languageModel = value
            case "dict": dictionary = value
            case "hmm": acousticModel = value
            case "language":
                guard LanguageTag.isWellFormed(value) else {
                    throw StenoError(.internal, "language=\(value) in --model \(modelSpec) is not a language tag such as en-US")
                }
                language = value
            default:
                throw StenoError(.internal, "\"\(key)\" in --model \(modelSpec): expected lm, dict, hmm or language")
            }
        }
    }

    /// The full argument list given to `cmd_ln_parse_r`.
    public var decoderArguments: [String] {
        ["-hmm", resolvedAcousticModel, "-lm", resolvedLanguageModel, "-dict", resolvedDictionary]
            + arguments
    }

    /// Checks what can be checked without loading anything.
    public func validate() throws(StenoError) {
        guard maxUtteranceSeconds > 0, maxUtteranceSeconds.isFinite else {
            throw StenoError(.internal, "maxUtteranceSeconds must be a positive number of seconds, not \(maxUtteranceSeconds)")
        }
        guard (160...16000).contains(blockSamples) else {
            throw StenoError(.internal, "blockSamples must be 160...16000, not \(blockSamples)")
        }
        guard recognizers >= 1, preparedRecognizers >= 0 else {
            throw StenoError(.internal, "recognizers must be at least 1, and preparedRecognizers not negative")
        }
        guard arguments.count % 2 == 0 else {
            throw StenoError(.internal, "pocketsphinx arguments must come in name/value pairs: \(arguments)")
        }
        for (index, name) in arguments.enumerated() where index % 2 == 0 {
            guard name.hasPrefix("-") else {
                throw StenoError(.internal, "pocketsphinx argument names start with '-': \"\(name)\"")
            }
            if name == "-logfn" {
                throw StenoError(.internal, "-logfn is process-wide: use PocketSphinxEngine.setLogFile instead")
            }
            if name == "-samprate", Double(arguments[index + 1]) != 16000 {
                throw StenoError(.internal, "-samprate is fixed at 16000")
            }
        }
        for path in [resolvedAcousticModel, resolvedLanguageModel, resolvedDictionary] where path.contains("\0") {
            throw StenoError(.internal, "a model path contains a NUL byte")
        }
    }
}
