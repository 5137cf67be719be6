// The client → server text messages of docs/protocol.md.

/// A validated `start` request.
public struct StartRequest: Sendable, Hashable {
    /// The declared input, already validated (`unsupported_audio` otherwise).
    public var audio: AudioFormat
    /// The language asked for, as sent (syntax checked), or nil when the client did not say.
    /// Whether the server can serve it is decided by `LanguageTag.serves(_:requested:)`.
    public var language: String?
    /// Whether to send `volatile` events (default true).
    public var volatile: Bool
    /// Whether results carry `words` (default true).
    public var words: Bool
    /// The broadcast channel to publish to (a valid `ChannelName`), or nil.
    public var channel: String?
    /// How results' text is written (default readable).
    public var format: TextFormat
    /// The session's own phrases, boost and pronunciations (`Vocabulary`), or nil.
    public var vocabulary: Vocabulary?
    /// How many alternative texts finals carry (0: none; at most `maxAlternatives`).
    public var alternatives: Int = 0
    /// What results do with profanity; nil: the server's default (`SessionConfiguration.profanity`).
    public var profanity: ProfanityMode?
    /// The model asked for by name, or nil. The session machine sets it to the model that
    /// serves the session (by `model`, else `language`, else the server's first).
    public var model: String?
    /// `"language":"auto"`, lanes (`languages`) and translation (`translate`); nil: none of them.
    public var languagePlan: LanguagePlan?
    /// The session this one goes on from (`continues`), a session the client lost: with its
    /// resume token, the proof that lets this session take over that one's channel at once
    /// when that session's instance is gone (`ChannelRelay`). Nothing without `channel`.
    public var continues: Continuation?

    /// `"multichannel": true` with `audio.channels` N (2-8): each channel is a session of its own
    /// on the connection (the server's route splits them; `audio` is then one channel's, mono);
    /// nil: the channels are mixed.
    public var multichannel: Int?
    /// The most channels a multichannel stream may have.
    public static let maxChannels = 8

    /// Not on the wire: the server's own sessions for uploaded files set it, so that their
    /// recognition waits behind live speech (`RecognizerOptions.background`).
    public var background = false

    /// `start`'s `continues`: `{"session":ID,"resumeToken":T}` of the lost session.
    public struct Continuation: Sendable, Hashable {
        public var session: String
        public var resumeToken: String

        public init(session: String, resumeToken: String) {
            self.session = session
            self.resumeToken = resumeToken
        }
    }

    /// The most alternatives a final may carry.
    public static let maxAlternatives = 10

    public init(audio: AudioFormat, language: String? = nil, volatile: Bool = true,
                words: Bool = true, channel: String? = nil, format: TextFormat = .readable) {
        self.audio = audio
        self.language = language
        self.volatile = volatile
        self.words = words
        self.channel = channel
        self.format = format
    }
}

/// A `resume`: continue a session whose connection dropped, on this new connection.
public struct ResumeRequest: Sendable, Hashable {
    /// The session id (`ready.session`).
    public var session: String
    /// The secret `ready.resumeToken` gave the client.
    public var resumeToken: String
    /// The last `seq` the client received (0 if none): every event after it is sent again.
    public var after: UInt64

    public init(session: String, resumeToken: String, after: UInt64) {
        self.session = session
        self.resumeToken = resumeToken
        self.after = after
    }
}

/// A client text message.
public enum ClientMessage: Sendable, Hashable {
    case start(StartRequest)
    /// `{"type":"resume","session":…,"resumeToken":…,"after":SEQ}`, instead of `start`.
    case resume(ResumeRequest)
    /// `{"type":"finalize"}`, optionally `"through":T` (seconds, ≥ 0).
    case finalize(through: Double?)
    case end
    case cancel
    /// `{"type":"gap","duration":D}`: D seconds of audio the client does not have (lost while
    /// it was disconnected): the timeline advances by D without audio.
    case gap(duration: Double)
    /// `{"type":"silence","duration":D}`: D seconds of silence the client did not send (it
    /// suppresses silence to save the network): the timeline advances by D as if silence had
    /// come, and nothing is reported.
    case silence(duration: Double)

    /// The longest gap or silence one message may declare, in seconds.
    public static let maxGapSeconds = 3600.0

    /// The wire name of the message's `type`.
    public var typeName: String {
        switch self {
        case .start: return "start"
        case .resume: return "resume"
        case .finalize: return "finalize"
        case .end: return "end"
        case .cancel: return "cancel"
        case .gap: return "gap"
        case .silence: return "silence"
        }
    }

    /// How client messages are read: they are shallow (nesting at most 16), and no larger than
    /// `maxBytes`, a session's frame limit (checked before they are read).
    public static func reader(maxBytes: Int = SessionLimits().maxFrameBytes) -> JSONParser {
        JSONParser(maxDepth: 16, maxBytes: max(maxBytes, 1))
    }

    /// Parses a text frame.
    ///
    /// Throws `bad_message` when the text is not JSON, not an object, has an unknown or missing
    /// `type`, or a known field of the wrong type or shape (the message names the field, e.g.
    /// `field "audio.sampleRate" must be an integer`); throws `unsupported_audio` when the
    /// audio format is well-formed but not one the server takes (AudioFormat's rules).
    /// Unknown fields are ignored, so clients may send fields of later protocol versions.
    public static func parse(_ text: String, parser: JSONParser = ClientMessage.reader()) throws(StenoError) -> ClientMessage {
        let value: JSONValue
        do {
            value = try parser.parse(text)
        } catch {
            throw StenoError(.badMessage, "not valid JSON: \(error)")
        }
        return try parse(value)
    }

    /// Parses a text frame given as UTF-8 bytes (invalid UTF-8 is `bad_message`).
    public static func parse(utf8 bytes: [UInt8], parser: JSONParser = ClientMessage.reader()) throws(StenoError) -> ClientMessage {
        let value: JSONValue
        do {
            value = try parser.parse(bytes)
        } catch {
            throw StenoError(.badMessage, "not valid JSON: \(error)")
        }
        return try parse(value)
    }

    /// Interprets an already parsed JSON value as a client message.
    public static func parse(_ value: JSONValue) throws(StenoError) -> ClientMessage {
        guard case .object(let object) = value else {
            throw StenoError(.badMessage, "expected a JSON object, not \(value.kindDescription)")
        }
        let fields = Fields(object: object, path: "")
        let type = try fields.requiredString("type")
        switch type {
        case "start":
            return .start(try parseStart(fields))
        case "finalize":
            var through: Double? = nil
            if let t = try fields.optionalNumber("through") {
                guard t >= 0 else {
                    throw StenoError(.badMessage, "field \"through\" must be a time in seconds, 0 or more")
                }
                through = t
            }
            return .finalize(through: through)
        case "end":
            return .end
        case "cancel":
            return .cancel
        case "resume":
            let session = try fields.requiredString("session")
            let token = try fields.requiredString("resumeToken")
            guard let after = try fields.requiredInteger("after"), after >= 0 else {
                throw StenoError(.badMessage, "field \"after\" must be the last seq received, 0 or more")
            }
            return .resume(ResumeRequest(session: session, resumeToken: token, after: UInt64(after)))
        case "gap", "silence":
            guard let duration = try fields.optionalNumber("duration"), duration > 0,
                  duration <= maxGapSeconds else {
                throw StenoError(.badMessage,
                    "field \"duration\" must be the seconds of audio skipped, more than 0 and at most 3600")
            }
            return type == "gap" ? .gap(duration: duration) : .silence(duration: duration)
        default:
            throw StenoError(.badMessage,
                "unknown message type \"\(clippedForError(type))\"; expected start, resume, finalize, end, cancel, gap or silence")
        }
    }

    private static func parseStart(_ fields: Fields) throws(StenoError) -> StartRequest {
        let audio = try fields.requiredObject("audio")
        let encoding = try audio.requiredString("encoding")
        let sampleRate = try audio.requiredInteger("sampleRate")
        let channels = try audio.requiredInteger("channels")
        let language = try fields.optionalString("language")
        if let language, !LanguageTag.isWellFormed(language) {
            throw StenoError(.badMessage,
                "field \"language\" must be a language tag such as \"en-US\", not \"\(clippedForError(language))\"")
        }
        let volatile = try fields.optionalBool("volatile") ?? true
        let words = try fields.optionalBool("words") ?? true
        let channel = try fields.optionalString("channel")
        if let channel, !ChannelName.isValid(channel) {
            throw StenoError(.badMessage, "field \"channel\" " + ChannelName.rule + ", not \"\(clippedForError(channel))\"")
        }
        var format = TextFormat.readable
        if let name = try fields.optionalString("format") {
            guard let chosen = TextFormat(rawValue: name) else {
                throw StenoError(.badMessage,
                    "field \"format\" must be \"readable\" or \"raw\", not \"\(clippedForError(name))\"")
            }
            format = chosen
        }
        var profanity: ProfanityMode?
        if let name = try fields.optionalString("profanity") {
            guard let chosen = ProfanityMode(rawValue: name) else {
                throw StenoError(.badMessage,
                    "field \"profanity\" must be \"keep\", \"mask\" or \"remove\", not \"\(clippedForError(name))\"")
            }
            profanity = chosen
        }
        // Shape first (bad_message, non-fatal), then whether the server takes the format (fatal).
        guard let rate = sampleRate else {
            throw StenoError(.unsupportedAudio, "the sample rate is out of range")
        }
        if try fields.optionalBool("multichannel") == true, case .number(let count)? = audio.object["channels"], count >= 2 {
            guard CoreMath.isIntegral(count), count <= Double(StartRequest.maxChannels) else {
                throw StenoError(.badMessage, "multichannel takes 2 to \(StartRequest.maxChannels) channels")
            }
            guard encoding == AudioEncoding.pcmS16LE.rawValue || encoding == AudioEncoding.pcmF32LE.rawValue else {
                throw StenoError(.badMessage, "multichannel needs PCM audio (pcm_s16le or pcm_f32le), interleaved")
            }
            guard channel == nil else {
                throw StenoError(.badMessage, "a multichannel session is not published to a channel (its channels' finals would interleave)")
            }
            // Each channel's session hears one channel.
            var request = try parseStart(fields, audio: AudioFormat(encodingName: encoding, sampleRate: rate, channels: 1),
                                         language: language, volatile: volatile, words: words, channel: channel, format: format,
                                         profanity: profanity)
            request.multichannel = Int(count)
            return request
        }
        guard let channelCount = channels else {
            throw StenoError(.unsupportedAudio, "channels must be 1 or 2")
        }
        return try parseStart(fields, audio: AudioFormat(encodingName: encoding, sampleRate: rate, channels: channelCount),
                              language: language, volatile: volatile, words: words, channel: channel, format: format,
                              profanity: profanity)
    }

    /// The rest of a `start`, its audio read.
    private static func parseStart(_ fields: Fields, audio audioFormat: AudioFormat, language: String?, volatile: Bool,
                                   words: Bool, channel: String?, format: TextFormat,
                                   profanity: ProfanityMode?) throws(StenoError) -> StartRequest {
        var request = StartRequest(audio: audioFormat, language: language, volatile: volatile, words: words, channel: channel,
                                   format: format)
        request.profanity = profanity
        if let continues = try fields.optionalObject("continues") {
            request.continues = StartRequest.Continuation(session: try continues.requiredString("session"),
                                                          resumeToken: try continues.requiredString("resumeToken"))
        }
        try parseVocabularyOptions(fields, into: &request)
        request.languagePlan = try LanguagePlan.parse(language: language, object: fields.object)
        return request
    }
}

/// The `start` fields of a session's vocabulary and results: "phrases", "boost",
/// "pronunciations", "alternatives", "model".
private func parseVocabularyOptions(_ fields: Fields, into request: inout StartRequest) throws(StenoError) {
    request.vocabulary = try Vocabulary.parse(
        phrases: fields.object["phrases"], boost: fields.object["boost"], pronunciations: fields.object["pronunciations"])
    if let alternatives = try fields.optionalNumber("alternatives") {
        guard CoreMath.isIntegral(alternatives), alternatives >= 0, alternatives <= Double(StartRequest.maxAlternatives) else {
            throw StenoError(.badMessage, "field \"alternatives\" must be a whole number from 0 to \(StartRequest.maxAlternatives)")
        }
        request.alternatives = Int(alternatives)
    }
    if let model = try fields.optionalString("model") {
        guard (1...64).contains(model.utf8.count) else {
            throw StenoError(.badMessage, "field \"model\" must be a model name of 1-64 characters (see /v1/models)")
        }
        request.model = model
    }
}

/// Typed access to an object's members, with error messages naming the field's path.
private struct Fields {
    let object: JSONObject
    let path: String

    func name(_ key: String) -> String { path.isEmpty ? key : path + "." + key }

    func missing(_ key: String) -> StenoError {
        StenoError(.badMessage, "field \"\(name(key))\" is missing")
    }

    func wrongType(_ key: String, _ expected: String) -> StenoError {
        StenoError(.badMessage, "field \"\(name(key))\" must be \(expected)")
    }

    func requiredString(_ key: String) throws(StenoError) -> String {
        guard let value = object[key] else { throw missing(key) }
        guard case .string(let s) = value else { throw wrongType(key, "a string") }
        return s
    }

    func optionalString(_ key: String) throws(StenoError) -> String? {
        guard let value = object[key], value != .null else { return nil }
        guard case .string(let s) = value else { throw wrongType(key, "a string") }
        return s
    }

    func optionalBool(_ key: String) throws(StenoError) -> Bool? {
        guard let value = object[key], value != .null else { return nil }
        guard case .bool(let b) = value else { throw wrongType(key, "true or false") }
        return b
    }

    func optionalNumber(_ key: String) throws(StenoError) -> Double? {
        guard let value = object[key], value != .null else { return nil }
        guard case .number(let n) = value else { throw wrongType(key, "a number") }
        return n
    }

    /// An integral number. Returns nil (not an error) for integers too large for `Int`,
    /// so the caller can report them as unsupported values rather than malformed ones.
    func requiredInteger(_ key: String) throws(StenoError) -> Int? {
        guard let value = object[key] else { throw missing(key) }
        guard case .number(let n) = value else { throw wrongType(key, "a number") }
        guard CoreMath.isIntegral(n) else { throw wrongType(key, "an integer") }
        return CoreMath.exactInteger(n).flatMap { Int(exactly: $0) }
    }

    func optionalObject(_ key: String) throws(StenoError) -> Fields? {
        guard let value = object[key], value != .null else { return nil }
        guard case .object(let o) = value else { throw wrongType(key, "an object") }
        return Fields(object: o, path: name(key))
    }

    func requiredObject(_ key: String) throws(StenoError) -> Fields {
        guard let value = object[key] else { throw missing(key) }
        guard case .object(let o) = value else { throw wrongType(key, "an object") }
        return Fields(object: o, path: name(key))
    }
}

/// Shortens client-supplied text quoted back in an error message.
public func clippedForError(_ text: String, _ limit: Int = 64) -> String {
    text.count <= limit ? text : String(text.prefix(limit)) + "…"
}

/// Broadcast channel names: 1–64 ASCII letters, digits, `-`, `_` or `.`, and not `.` or `..`
/// (names appear in URL paths such as `/v1/channels/NAME/captions.vtt`).
public enum ChannelName {
    public static let maxLength = 64
    static let rule = "must be 1-64 letters, digits, '-', '_' or '.'"

    public static func isValid(_ name: String) -> Bool {
        let utf8 = name.utf8
        guard (1...maxLength).contains(utf8.count), name != ".", name != ".." else { return false }
        return utf8.allSatisfy { byte in
            switch byte {
            case UInt8(ascii: "a")...UInt8(ascii: "z"), UInt8(ascii: "A")...UInt8(ascii: "Z"),
                 UInt8(ascii: "0")...UInt8(ascii: "9"),
                 UInt8(ascii: "-"), UInt8(ascii: "_"), UInt8(ascii: "."):
                return true
            default:
                return false
            }
        }
    }

    /// Throws `bad_message` naming the rule when `name` is not valid.
    public static func validate(_ name: String) throws(StenoError) {
        guard isValid(name) else {
            throw StenoError(.badMessage, "channel name " + rule + ", not \"\(clippedForError(name))\"")
        }
    }
}

/// Language tags (BCP 47, as far as the server cares).
public enum LanguageTag {
    /// 1–35 ASCII characters: a primary subtag of 2–8 letters, then subtags of 1–8 letters or
    /// digits separated by `-` (or `_`, as POSIX locales write it).
    public static func isWellFormed(_ tag: String) -> Bool {
        guard (1...35).contains(tag.utf8.count) else { return false }
        let subtags = subtags(of: tag)
        guard let primary = subtags.first, (2...8).contains(primary.count),
              primary.allSatisfy({ $0.isASCII && $0.isLetter }) else { return false }
        return subtags.dropFirst().allSatisfy { sub in
            (1...8).contains(sub.count) && sub.allSatisfy { $0.isASCII && ($0.isLetter || $0.isNumber) }
        }
    }

    /// The primary language subtag, lowercased: "en" for "en-US".
    public static func primary(_ tag: String) -> String {
        (subtags(of: tag).first ?? "").lowercased()
    }

    /// `start`'s `"language":"auto"`: the language is found for each utterance.
    public static let auto = "auto"

    /// What a multilingual model recognizes (ISO 639's "multiple languages"): a Whisper model
    /// that hears the session's language, or finds it.
    public static let multilingual = "mul"

    /// Whether an engine recognizing `served` (e.g. "en-US") can serve a request for `requested`.
    ///
    /// Decision: the primary languages must match, case-insensitively ("en", "en-US", "EN_gb"
    /// are all served by an "en-US" model; "fr-FR" is not). A regional variant is served by the
    /// model's variant, and `ready.engine.language` tells the client which one it got. A
    /// multilingual model (`multilingual`) serves every language (one it lacks is detected).
    public static func serves(_ served: String, requested: String) -> Bool {
        let wanted = primary(requested)
        return !wanted.isEmpty && (wanted == primary(served) || primary(served) == multilingual)
    }

    private static func subtags(of tag: String) -> [Substring] {
        tag.split(separator: "-", omittingEmptySubsequences: false)
            .flatMap { $0.split(separator: "_", omittingEmptySubsequences: false) }
    }
}
