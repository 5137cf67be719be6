// Deepgram's live API configures a session in the handshake's query (`/v1/listen?model=…&
// encoding=linear16&sample_rate=16000&interim_results=true…`): what each parameter becomes in
// Steno's terms, and which ones Steno takes without honouring them (docs/protocol.md,
// "Deepgram's live API").

import StenoAudio
import StenoCore
import StenoTransport

/// A Deepgram client's session, read from its handshake's query.
struct DeepgramQuery: Sendable {
    /// The session's `start`.
    var start: StartRequest
    /// Whether `Results` with `is_final: false` are sent (`interim_results`).
    var interim = false
    /// Whether transcripts are punctuated and capitalized (`punctuate` or `smart_format`).
    var punctuate = false
    /// Whether `SpeechStarted` is sent (`vad_events`).
    var vadEvents = false
    /// Whether `UtteranceEnd` is sent (`utterance_end_ms` given).
    var utteranceEnd = false
    /// The model the client named, as it named it.
    var model: String
    /// `multichannel=true`: how many channels, each its own session (`ChannelGroup`); else 1.
    var channels = 1
    static let maxChannels = 8
    /// How the audio comes: raw samples (`linear16`, or G.711 expanded to 16-bit PCM before the
    /// pipeline), or a container read from the stream's first bytes (WAV, or Ogg Opus), whose
    /// header decides the format: the session starts once it has come.
    enum Input: Sendable, Equatable {
        case samples(G711?)
        case container
    }
    var input: Input

    /// The G.711 law of raw companded samples.
    var companding: G711? { if case .samples(let law) = input { law } else { nil } }

    /// Parameters taken and not honoured: Steno has no such feature (diarization, redaction,
    /// search, entities, callbacks, tags…), or decides it itself (`endpointing`).
    static let ignored: Set<String> = [
        "callback", "callback_method", "detect_entities", "diarize", "diarize_model", "dictation", "endpointing",
        "extra", "filler_words", "language_hint", "mip_opt_out", "redact", "replace", "search", "tag", "version",
        "numerals", "token",
    ]

    /// Reads the query; a message for a 400 when something in it cannot be served.
    static func parse(_ query: [QueryItem], models: [ServedModel]) -> Result<DeepgramQuery, StenoError> {
        func fail(_ message: String) -> Result<DeepgramQuery, StenoError> { .failure(StenoError(.badMessage, message)) }
        var values: [String: String] = [:]
        var phrases: [String] = []
        for item in query {
            switch item.name {
            case "keyterm": phrases.append(item.value)
            case "keywords":
                // "word:boost": Steno's phrases have one boost for all; the word is what counts.
                var word = Substring(item.value)
                if let colon = word.lastIndex(of: ":"), Double(word[word.index(after: colon)...]) != nil {
                    word = word[..<colon]
                }
                phrases.append(String(word))
            default: values[item.name] = item.value
            }
        }
        func flag(_ name: String) -> Bool?? {
            guard let value = values[name] else { return .some(nil) }
            switch value.lowercased() {
            case "true": return .some(true)
            case "false": return .some(false)
            default: return nil
            }
        }
        var booleans: [String: Bool] = [:]
        for name in ["interim_results", "punctuate", "smart_format", "vad_events", "profanity_filter", "multichannel"] {
            guard let value = flag(name) else { return fail("\(name) must be true or false, not \"\(clippedForError(values[name] ?? ""))\"") }
            if let value { booleans[name] = value }
        }
        let channels = Int(values["channels"] ?? "1") ?? 0
        let multichannel = booleans["multichannel"] == true && channels > 1
        if multichannel {
            guard channels <= Self.maxChannels else { return fail("multichannel takes at most \(Self.maxChannels) channels, not \(channels)") }
            guard ["linear16", "mulaw", "alaw"].contains(values["encoding"] ?? "") else {
                return fail("multichannel=true needs raw audio: encoding linear16, mulaw or alaw, with sample_rate and channels")
            }
        }
        let encodingName = values["encoding"]
        var audio: AudioFormat
        let input: Input
        do throws(StenoError) {
            switch encodingName {
            case nil, "opus"?, "ogg-opus"?:
                // The container says (the format here is a placeholder until its header has come).
                input = .container
                audio = try AudioFormat(encoding: .opus, sampleRate: 48_000, channels: 1)
            case "linear16"?, "mulaw"?, "alaw"?:
                guard let rateText = values["sample_rate"], let rate = Int(rateText) else {
                    return fail("sample_rate is required with encoding=\(encodingName ?? "")")
                }
                input = .samples(encodingName == "mulaw" ? .muLaw : encodingName == "alaw" ? .aLaw : nil)
                // Each channel its own session (mono) with multichannel; else mixed, as in `start`.
                audio = try AudioFormat(encoding: .pcmS16LE, sampleRate: rate, channels: multichannel ? 1 : channels)
            case let other?:
                return fail("encoding \"\(clippedForError(other))\" is not supported by this server (linear16, mulaw, alaw, opus "
                            + "in Ogg; or no encoding, for WAV or Ogg Opus)")
            }
        } catch {
            return .failure(StenoError(.badMessage, error.message))
        }
        var start = StartRequest(audio: audio, volatile: booleans["interim_results"] ?? false, words: true, format: .readable)
        let model = values["model"] ?? "general"
        // A model this server has by that name serves it; Deepgram's own names ("nova-3") get
        // the server's model for the language.
        if models.contains(where: { $0.engine.model == model }) { start.model = model }
        switch values["language"] {
        case "multi"?: start.languagePlan = LanguagePlan(auto: true)
        case let language?: start.language = language
        case nil: break
        }
        if booleans["profanity_filter"] == true { start.profanity = .mask }
        if !phrases.isEmpty {
            do throws(StenoError) {
                start.vocabulary = try Vocabulary(phrases: phrases)
            } catch {
                return .failure(StenoError(.badMessage, "keyterm/keywords: " + error.message))
            }
        }
        if case .failure(let error) = SessionMachine.model(for: start, among: models) { return .failure(error) }
        var parsed = DeepgramQuery(start: start, model: model, input: input)
        parsed.channels = multichannel ? channels : 1
        parsed.interim = start.volatile
        parsed.punctuate = booleans["punctuate"] == true || booleans["smart_format"] == true
        parsed.vadEvents = booleans["vad_events"] == true
        if let text = values["utterance_end_ms"] {
            guard let ms = Int(text), ms >= 1000 else { return fail("utterance_end_ms must be a whole number of at least 1000") }
            parsed.utteranceEnd = true
        }
        return .success(parsed)
    }
}
