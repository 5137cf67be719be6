import StenoCore
import StenoSystem
import StenoTransport

/// What `steno send` and `steno listen` share: the server, credentials, output, retries.
struct ClientOptions: Sendable, Equatable {
    /// The server's base address; the routes (`/v1/stream`, `/v1/listen`) go after its path.
    var server = WebSocketURL(secure: false, host: "127.0.0.1", port: 8080)
    var token: String?
    /// PEM file of authorities to trust for `wss://` (e.g. the server's self-signed certificate).
    var caFile: String?
    var format = CaptionOutputFormat.text
    var reconnection = Reconnection()
    var logLevel = LogLevel.info

    /// The address of `route` (with its query) on the server.
    func url(_ route: String) -> WebSocketURL {
        var base = server.path
        if let query = base.firstIndex(of: "?") { base = String(base[..<query]) }
        while base.hasSuffix("/") { base.removeLast() }
        return server.with(path: base + route)
    }

    enum Flags {
        static let server = Flag("server", value: "URL", help: "the server: ws://HOST:PORT, or wss:// for TLS",
                                 default: "ws://127.0.0.1:8080", environment: "STENO_SERVER")
        static let token = Flag("token", value: "TOKEN", help: "bearer token the server asks for",
                                default: "none", environment: "STENO_TOKEN")
        static let ca = Flag("ca", value: "FILE", help: "trust this PEM certificate (authority) for wss://, e.g. a self-signed one",
                             default: "the system's", environment: "STENO_CA")
        static let format = Flag("format", value: "F", help: "text: [start → end] text per final; jsonl: the wire events; vtt, srt, scc (CEA-608), ttml (IMSC 1.1)",
                                 default: CaptionOutputFormat.text.rawValue)
        static let retryFor = Flag("retry-for", value: "SECONDS", help: "give up (exit 4) after this long without reaching the server",
                                   default: "300")
        static let retryMax = Flag("retry-max", value: "SECONDS", help: "longest wait between attempts (also caps Retry-After)",
                                   default: "30")
        static let logLevel = Flag("log-level", value: "LEVEL", help: "messages on stderr: " + LogLevel.allCases.map(\.rawValue).joined(separator: "|"),
                                   default: LogLevel.info.rawValue)

        static let all = [server, token, ca, format, retryFor, retryMax, logLevel]
    }

    static let exitCodes = """
        Exit codes: 0 done (the session ended and its last finals were printed); 1 the input
        failed (unreadable file, not WAV, capture device error); 2 bad command line; 3 refused
        by the server (HTTP 401/403/404 at the handshake, or a session error it would repeat,
        such as unsupported audio); 4 the server could not be reached for --retry-for
        seconds; 130 interrupted twice; 141 standard output was closed.
        """

    /// The shared flags of `given`.
    static func parse(_ given: ParsedCommandLine) throws(UsageError) -> ClientOptions {
        var options = ClientOptions()
        if let value = given.single(Flags.server) {
            guard let url = WebSocketURL(value.text) else {
                throw given.error(.invalidValue(source: value.source, value: value.text,
                                                expected: "ws://HOST[:PORT] or wss://HOST[:PORT]"))
            }
            options.server = url
        }
        if let value = given.single(Flags.token) { options.token = try given.token(value) }
        if let value = given.single(Flags.ca) { options.caFile = try given.path(value) }
        if let value = given.single(Flags.format) {
            options.format = CaptionOutputFormat(rawValue: try given.choice(value, CaptionOutputFormat.allCases.map(\.rawValue)))!
        }
        if let value = given.single(Flags.retryFor) {
            options.reconnection.giveUpAfter = try given.seconds(value, in: 0...(7 * 86400))
        }
        if let value = given.single(Flags.retryMax) {
            options.reconnection.maxDelay = try given.seconds(value, in: 0.1...3600)
        }
        if let value = given.single(Flags.logLevel) { options.logLevel = try given.logLevel(value) }
        if options.caFile != nil && !options.server.secure {
            throw given.error(.requires(option: Flags.ca.flag, other: "a wss:// --server", reason: "a CA only applies to TLS"))
        }
        return options
    }
}

/// `steno send`'s command line.
struct SendOptions: Sendable, Equatable {
    enum Input: Sendable, Equatable {
        case file(String)
        case standardInput(raw: RawPCMFormat?)
        case device(name: String, sampleRate: Int, channels: Int)
    }

    var client = ClientOptions()
    var input = Input.standardInput(raw: nil)
    var channel: String?
    var language: String?
    /// `start`'s "languages" (lanes) and "translate".
    var lanes: [String] = []
    var translate: String?
    /// The server's model to recognize with, by name (`start`'s "model"); nil: the server's choice.
    var model: String?
    /// The `--phrases` file, read when the command runs (into `phrases`).
    var phrasesFile: String?
    /// The session's phrases (`start`'s "phrases").
    var phrases: [String] = []
    /// `start`'s "boost"; nil: the server's default.
    var boost: Double?
    var encoding = WireEncoding.opus
    /// Send a file as fast as the server takes it, not at real time.
    var fast = false
    /// Seconds of audio held while the connection is down (and unsent while it is slow).
    var bufferSeconds = 60.0
    var listDevices = false
    /// `--no-silence-suppression` turns it off.
    var silenceSuppression = true
    /// How the server writes the captions' text (`start`'s `"format"`).
    var text = TextFormat.readable
    /// What the captions do with profanity (`start`'s `"profanity"`); nil: the server's default.
    var profanity: ProfanityMode?

    /// The `start` of a new session with these options, for audio in `format`.
    /// `continues`: the session lost before this one, sent when publishing on a channel.
    func startText(_ format: AudioFormat, continues: StartRequest.Continuation? = nil) -> String {
        ClientMessage.startText(format, language: language, model: model, channel: channel, format: text, phrases: phrases,
                                boost: boost, profanity: profanity, continues: channel == nil ? nil : continues,
                                lanes: lanes, translate: translate)
    }

    /// Live input (a device, standard input, a file at real time) leaves silence out and
    /// declares it instead; a file sent `--fast` is sent whole.
    var suppressesSilence: Bool {
        if case .file = input, fast { return false }
        return silenceSuppression
    }

    enum Flags {
        static let channel = Flag("channel", value: "NAME", help: "publish on this broadcast channel (steno listen follows it)")
        static let language = Flag("language", value: "TAG", help: "the language spoken, e.g. en-US, or auto: found for each utterance",
                                   default: "the server's")
        static let languages = Flag("languages", value: "TAGS", help: "lanes: the languages spoken, e.g. ru,en (each utterance in the likeliest; none likely: no final)")
        static let translate = Flag("translate", value: "LANG", help: "captions in this language whatever is spoken: en (Whisper translates into English)")
        static let model = Flag("model", value: "NAME", help: "recognize with this model of the server's (its /v1/models names them)",
                                default: "the server's, or the one serving --language")
        static let phrases = Flag("phrases", value: "FILE", help: PhraseFile.help)
        static let boost = Flag("boost", value: "B", help: PhraseFile.boostHelp, default: "1")
        static let encoding = Flag("encoding", value: "E", help: "opus (20 ms packets) or pcm", default: WireEncoding.opus.rawValue)
        static let fast = Flag.toggle("fast", help: "send a file as fast as the server takes it, not at real time")
        static let rawRate = Flag("raw-rate", value: "HZ", help: "standard input is raw PCM at this rate (8000-48000), not WAV")
        static let rawChannels = Flag("raw-channels", value: "N", help: "channels of raw PCM (1 or 2)", default: "1")
        static let rawFormat = Flag("raw-format", value: "F", help: "samples of raw PCM: s16le or f32le", default: "s16le")
        static let device = Flag("device", value: "NAME", help: "capture from this ALSA device (e.g. default, hw:1)")
        static let rate = Flag("rate", value: "HZ", help: "capture rate of --device", default: "16000")
        static let listDevices = Flag.toggle("list-devices", help: "list the ALSA capture devices and exit")
        static let bufferSeconds = Flag("buffer-seconds", value: "SECONDS",
                                        help: "audio held while disconnected; a device's oldest is dropped beyond it",
                                        default: "60")
        static let noSilenceSuppression = Flag.toggle(
            "no-silence-suppression",
            help: "send silence as audio; by default live input (a device, -, a file at real time) leaves pauses out and declares them")
        static let text = Flag("text", value: "T", help: TextFormat.flagHelp, default: TextFormat.readable.rawValue)
        static let profanity = Flag("profanity", value: "MODE",
                                    help: "what the captions do with swear words and slurs: keep, mask (f***) or remove",
                                    default: "the server's")
    }

    static let spec = CommandSpec(
        command: "steno send", arguments: "[INPUT]", maxArguments: 1,
        summary: """
            Streams audio to a Steno server and prints its captions as they come. INPUT is a WAV
            file (sent at real time, or --fast), or - for standard input (WAV, or raw PCM with
            --raw-rate); --device captures from a microphone. The connection survives the
            network: it reconnects with backoff, keeps the audio captured meanwhile (up to
            --buffer-seconds) and sends it after, and waits out a full server. Ctrl-C ends the
            session and waits for its last finals; a second Ctrl-C quits at once.
            """,
        flags: ClientOptions.Flags.all + [
            Flags.channel, Flags.language, Flags.languages, Flags.translate, Flags.model, Flags.phrases, Flags.boost, Flags.encoding, Flags.fast, Flags.rawRate, Flags.rawChannels, Flags.rawFormat,
            Flags.device, Flags.rate, Flags.listDevices, Flags.bufferSeconds,
        ] + [Flags.noSilenceSuppression, Flags.text, Flags.profanity],
        epilogue: ClientOptions.exitCodes)

    /// The options, or nil when the help text was asked for.
    static func parse(_ arguments: [String], environment: [String: String]) throws(UsageError) -> SendOptions? {
        let given = try spec.parse(arguments, environment: environment)
        if given.helpRequested { return nil }
        var options = SendOptions()
        options.client = try ClientOptions.parse(given)
        options.listDevices = given.isOn(Flags.listDevices)
        if let value = given.single(Flags.channel) {
            guard ChannelName.isValid(value.text) else {
                throw given.error(.invalidValue(source: value.source, value: value.text,
                                                expected: "1-64 letters, digits, '-', '_' or '.'"))
            }
            options.channel = value.text
        }
        if let value = given.single(Flags.language) {
            guard LanguageTag.isWellFormed(value.text) else {
                throw given.error(.invalidValue(source: value.source, value: value.text, expected: "a language tag such as en-US"))
            }
            options.language = value.text
        }
        if let value = given.single(Flags.languages) {
            let tags = value.text.split(separator: ",").map { $0.trimmingCharacters(in: .whitespaces) }
            guard (1...LanguagePlan.maxLanes).contains(tags.count), tags.allSatisfy(LanguageTag.isWellFormed), options.language == nil else {
                throw given.error(.invalidValue(source: value.source, value: value.text,
                                                expected: "1-\(LanguagePlan.maxLanes) language tags, e.g. ru,en (and no --language)"))
            }
            options.lanes = tags
        }
        if let value = given.single(Flags.translate) {
            guard LanguageTag.primary(value.text) == "en" else {
                throw given.error(.invalidValue(source: value.source, value: value.text, expected: "en (Whisper translates into English only)"))
            }
            options.translate = "en"
        }
        if let value = given.single(Flags.model) {
            guard (1...64).contains(value.text.utf8.count) else {
                throw given.error(.invalidValue(source: value.source, value: value.text, expected: "a model name of 1-64 characters"))
            }
            options.model = value.text
        }
        if let value = given.single(Flags.phrases) { options.phrasesFile = try given.path(value) }
        options.boost = try PhraseFile.boost(given, Flags.boost, phrases: Flags.phrases)
        if let value = given.single(Flags.encoding) {
            options.encoding = WireEncoding(rawValue: try given.choice(value, WireEncoding.allCases.map(\.rawValue)))!
        }
        options.fast = given.isOn(Flags.fast)
        options.silenceSuppression = !given.isOn(Flags.noSilenceSuppression)
        if let value = given.single(Flags.bufferSeconds) { options.bufferSeconds = try given.seconds(value, in: 1...3600) }
        if let value = given.single(Flags.text) {
            options.text = TextFormat(rawValue: try given.choice(value, TextFormat.allCases.map(\.rawValue)))!
        }
        if let value = given.single(Flags.profanity) {
            options.profanity = ProfanityMode(rawValue: try given.choice(value, ProfanityMode.allCases.map(\.rawValue)))!
        }

        var raw: RawPCMFormat?
        if let value = given.single(Flags.rawRate) {
            raw = RawPCMFormat(sampleRate: try given.integer(value, in: AudioFormat.pcmRates), channels: 1, sample: .s16le)
        }
        for flag in [Flags.rawChannels, Flags.rawFormat] where given.wasGiven(flag) && raw == nil {
            throw given.error(.requires(option: flag.flag, other: Flags.rawRate.flag, reason: "raw PCM needs its rate"))
        }
        if let value = given.single(Flags.rawChannels) { raw?.channels = try given.integer(value, in: 1...2) }
        if let value = given.single(Flags.rawFormat) {
            raw?.sample = RawPCMFormat.Sample(rawValue: try given.choice(value, RawPCMFormat.Sample.allCases.map(\.rawValue)))!
        }

        let device = given.single(Flags.device).map(\.text)
        if given.wasGiven(Flags.rate) && device == nil {
            throw given.error(.requires(option: Flags.rate.flag, other: Flags.device.flag, reason: "it is the capture rate"))
        }
        let rate = try given.single(Flags.rate).map { (value) throws(UsageError) in try given.integer(value, in: AudioFormat.pcmRates) } ?? 16_000
        let argument = given.arguments.first
        switch (argument, device) {
        case (_?, _?):
            throw given.error(.conflict("INPUT", Flags.device.flag))
        case (nil, let device?):
            guard !device.isEmpty else {
                throw given.error(.invalidValue(source: Flags.device.flag, value: device, expected: "an ALSA device name"))
            }
            if raw != nil { throw given.error(.conflict(Flags.rawRate.flag, Flags.device.flag)) }
            options.input = .device(name: device, sampleRate: rate, channels: 1)
        case ("-"?, nil):
            options.input = .standardInput(raw: raw)
        case (let path?, nil):
            if raw != nil {
                throw given.error(.requires(option: Flags.rawRate.flag, other: "INPUT -", reason: "raw PCM comes on standard input"))
            }
            options.input = .file(path)
        case (nil, nil):
            if !options.listDevices { throw given.error(.missingArgument("INPUT (a WAV file, or - for standard input) or --device")) }
        }
        return options
    }
}

/// `steno listen`'s command line.
struct ListenOptions: Sendable, Equatable {
    var client = ClientOptions()
    var channel = ""
    /// The captions' language to follow (a translated broadcast's English or its original); nil: the publisher's own.
    var language: String?
    /// obs-websocket 5 of an OBS Studio to put the captions into.
    var obs: WebSocketURL?
    var obsPassword: String?
    /// OBS shows words as they become stable, not only cues of finals.
    var liveWords = false
    /// YouTube Live's caption ingestion URL.
    var youtubeURL: String?

    enum Flags {
        static let channel = Flag("channel", value: "NAME", help: "the broadcast channel to follow (required)")
        static let language = Flag("language", value: "TAG", help: "the captions in this language, when the broadcast carries them: en, or original (what a translated broadcast's talker said)")
        static let obs = Flag("obs", value: "URL", help: "also put the captions into OBS Studio's stream (CEA-608), through obs-websocket 5: ws://HOST:4455",
                              environment: "STENO_OBS")
        static let obsPassword = Flag("obs-password", value: "P", help: "OBS's WebSocket password (OBS: Tools → WebSocket Server Settings)",
                                      environment: "STENO_OBS_PASSWORD")
        static let liveWords = Flag.toggle("live-words", help: "OBS: the caption grows as words become stable, instead of cues of finals")
        static let youtubeURL = Flag("youtube-url", value: "URL", help: "also post the captions to YouTube Live's caption ingestion URL (YouTube Studio: the stream's closed captions, POST captions to URL)",
                                     environment: "STENO_YOUTUBE_URL")
    }

    static let spec = CommandSpec(
        command: "steno listen",
        summary: """
            Prints a broadcast channel's captions: the finals so far, then the live ones, following
            the channel across reconnects without printing a final twice. Runs until interrupted.
            """,
        flags: [Flags.channel, Flags.language, Flags.obs, Flags.obsPassword, Flags.liveWords, Flags.youtubeURL] + ClientOptions.Flags.all,
        epilogue: ClientOptions.exitCodes + "\nWith --obs or --youtube-url, 3 is also OBS refusing the password, or YouTube the URL.")

    static func parse(_ arguments: [String], environment: [String: String]) throws(UsageError) -> ListenOptions? {
        let given = try spec.parse(arguments, environment: environment)
        if given.helpRequested { return nil }
        var options = ListenOptions()
        options.client = try ClientOptions.parse(given)
        guard let value = given.single(Flags.channel) else { throw given.error(.missingArgument(Flags.channel.flag)) }
        guard ChannelName.isValid(value.text) else {
            throw given.error(.invalidValue(source: value.source, value: value.text, expected: "1-64 letters, digits, '-', '_' or '.'"))
        }
        options.channel = value.text
        if let value = given.single(Flags.language) {
            guard Renditions.isValidChoice(value.text) else {
                throw given.error(.invalidValue(source: value.source, value: value.text, expected: "a BCP 47 tag (en, it) or original"))
            }
            options.language = value.text
        }
        if let value = given.single(Flags.obs) {
            guard let url = WebSocketURL(value.text) else {
                throw given.error(.invalidValue(source: value.source, value: value.text, expected: "ws://HOST[:PORT] or wss://HOST[:PORT]"))
            }
            options.obs = url
        }
        if let value = given.single(Flags.obsPassword) {
            guard options.obs != nil else {
                throw given.error(.requires(option: Flags.obsPassword.flag, other: Flags.obs.flag, reason: "the password is OBS's"))
            }
            options.obsPassword = value.text
        }
        options.liveWords = given.isOn(Flags.liveWords)
        if options.liveWords && options.obs == nil {
            throw given.error(.requires(option: Flags.liveWords.flag, other: Flags.obs.flag, reason: "live words are shown in OBS"))
        }
        if let value = given.single(Flags.youtubeURL) {
            let text = value.text
            guard text.hasPrefix("https://") || text.hasPrefix("http://"), text.count > 8, !text.contains(where: \.isWhitespace) else {
                throw given.error(.invalidValue(source: value.source, value: text, expected: "an http:// or https:// URL"))
            }
            options.youtubeURL = text
        }
        return options
    }
}
