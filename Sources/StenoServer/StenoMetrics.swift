import StenoCore
import StenoPrometheus
import StenoSpeech
import StenoSystem
import StenoWorkers

/// Every metric the server publishes, registered on one registry.
///
/// Times are seconds. Audio seconds are on the audio timeline (samples received at the
/// declared rate), not wall-clock time. The transport updates these as things happen;
/// ``attach(pool:)`` adds the worker pool's gauges, read at each scrape, and `attach(sessions:)`
/// the sessions open.
public final class StenoMetrics: Sendable {
    public let registry: MetricsRegistry

    /// `steno_sessions_total`: `/v1/stream` connections opened (each a session, started or not).
    public let sessionsTotal: Counter
    /// `steno_uploads_total{status}`: files posted to the OpenAI-compatible routes, by the
    /// HTTP status they were answered with.
    public let uploads: MetricFamily<Counter>
    /// `steno_handshakes_refused_total{reason}`: WebSocket upgrades refused before a
    /// session existed; reasons `unauthorized`, `forbidden_origin`, `capacity`, `overload`,
    /// `draining`, and (by the transport, before any route) `malformed` (400 or 426: not a
    /// well-formed WebSocket handshake), `header_too_large` (431), `address_limit` (429) and
    /// `handshake_budget` (503; connections refused as they were accepted).
    public let handshakesRefused: MetricFamily<Counter>
    /// `steno_messages_refused_total`: WebSockets closed with 1013 because a message's next
    /// piece would have taken the memory of unfinished messages past its budget.
    public let messagesRefused: Counter
    /// `steno_viewers_active`: broadcast viewers connected now.
    public let viewersActive: Gauge
    /// `steno_audio_received_seconds_total`: audio received from clients.
    public let audioReceivedSeconds: Counter
    /// `steno_audio_analyzed_seconds_total`: audio the recognizers have processed.
    public let audioAnalyzedSeconds: Counter
    /// `steno_lag_seconds`: received minus analyzed, sampled at every tick per talker (a
    /// session with audio coming in or more than a block waiting; a quiet one is not visited).
    public let lagSeconds: Histogram
    /// `steno_events_sent_total{type}`: events sent to clients, by `type`.
    public let eventsSent: MetricFamily<Counter>
    /// `steno_errors_total{code}`: `error` events, by protocol code.
    public let errors: MetricFamily<Counter>
    /// The children of `eventsSent` and `errors`, looked up once: they are counted per event
    /// and per viewer, and a family lookup takes its lock and hashes the labels.
    private let eventCounters: [String: Counter]
    private let errorCounters: [ErrorCode: Counter]
    /// `steno_outbound_queue_bytes`: events waiting to be written, all connections together.
    public let outboundQueueBytes: Gauge
    /// `steno_inbound_buffered_audio_seconds`: audio received but not yet analyzed, all
    /// sessions together.
    public let inboundBufferedAudioSeconds: Gauge
    /// `steno_session_duration_seconds`: how long sessions lasted, wall clock, at close.
    public let sessionDurationSeconds: Histogram
    /// `steno_end_latency_seconds`: from receiving `end` to sending `ended`, wall clock.
    public let endLatencySeconds: Histogram
    /// `steno_recognizers_created_total`: speech recognizers created.
    public let recognizersCreated: Counter
    /// `steno_opus_decoders_created_total`: Opus decoders created.
    public let decodersCreated: Counter
    /// `steno_admission_busy`: 1 while new sessions are refused for load, else 0.
    public let admissionBusy: Gauge
    /// `steno_admission_utilization`: the share of the workers' time the sessions would take
    /// with one more talker (`Admission`'s projection), at the last tick.
    public let admissionUtilization: Gauge
    /// `steno_admission_talker_demand`: what the average talker takes, in workers (the share of
    /// one worker's time), as admission counts a newcomer.
    public let admissionTalkerDemand: Gauge
    /// `steno_admission_speech_cost`: workers' time per second of speech, measured over the
    /// sessions' lanes (the engine's RTF on this machine with Steno's overhead).
    public let admissionSpeechCost: Gauge
    /// `steno_admission_speech_fraction`: the share of its time a talker speaks, as measured.
    public let admissionSpeechFraction: Gauge
    /// `steno_admission_newcomers_talking`: the share of recent new sessions that spoke within
    /// their first seconds, what a new session is counted at before it speaks.
    public let admissionNewcomersTalking: Gauge
    /// `steno_stalled_utterances_total`: utterances finalized because their audio stopped in
    /// the middle of speech (`SessionLimits.stallSeconds`), to free a shared recognizer.
    public let stalledUtterances: Counter
    /// `steno_write_stalls_total`: connections (sessions and viewers) closed as slow consumers
    /// because their events waited `--write-stall-seconds` with nothing written.
    public let writeStalls: Counter

    /// `steno_channel_viewers{channel}`, `steno_channel_events_sent_total{channel}`,
    /// `steno_channel_viewers_dropped_total{channel}`: per channel, for the first
    /// `maxChannelLabels` channel names seen; the others are counted together as
    /// `channel="(other)"` (no channel can be named so), so the series stay bounded.
    public let channelViewers: MetricFamily<Gauge>
    public let channelEventsSent: MetricFamily<Counter>
    public let channelViewersDropped: MetricFamily<Counter>
    public let maxChannelLabels: Int
    // `Locked`, not `Mutex`: ThreadSanitizer cannot see a `Mutex` on Linux (StenoSystem.Locked).
    private let channelLabels = Locked<Set<String>>([])
    public static let otherChannels = "(other)"

    /// One channel's series.
    public struct ChannelCounters: Sendable {
        public let viewers: Gauge
        public let events: Counter
        public let dropped: Counter
    }

    /// The series of channel `name` (or of "(other)" once `maxChannelLabels` names have theirs).
    public func channelCounters(_ name: String) -> ChannelCounters {
        let label = channelLabels.withLock { labels -> String in
            if labels.contains(name) { return name }
            guard labels.count < maxChannelLabels else { return Self.otherChannels }
            labels.insert(name)
            return name
        }
        return ChannelCounters(viewers: channelViewers.labels(label), events: channelEventsSent.labels(label),
                               dropped: channelViewersDropped.labels(label))
    }

    /// The event types of the protocol; their series exist from the start at 0.
    public static let eventTypes = ServerEventKind.allCases.map(\.rawValue)
    /// Handshake refusal reasons; their series exist from the start at 0.
    public static let refusalReasons = ["unauthorized", "forbidden_origin", "capacity", "overload", "draining",
                                        "malformed", "header_too_large",
                                        "address_limit", "handshake_budget"]

    /// Buckets for lag and latency: 50 ms to 30 s.
    public static let latencyBuckets: [Double] = [0.05, 0.1, 0.25, 0.5, 1, 2, 5, 10, 30]
    /// Buckets for session durations: 1 s to 4 h.
    public static let durationBuckets: [Double] = [1, 5, 15, 30, 60, 300, 900, 1800, 3600, 7200, 14400]

    public init(registry: MetricsRegistry = MetricsRegistry(), maxChannelLabels: Int = 32) {
        self.registry = registry
        self.maxChannelLabels = max(0, maxChannelLabels)
        channelViewers = registry.gauge("steno_channel_viewers", help: "Viewers following a channel now.", labels: ["channel"])
        channelEventsSent = registry.counter(
            "steno_channel_events_sent_total", help: "Events queued for a channel's viewers.", labels: ["channel"])
        channelViewersDropped = registry.counter(
            "steno_channel_viewers_dropped_total", help: "A channel's viewers closed for not reading (4008).", labels: ["channel"])
        sessionsTotal = registry.counter("steno_sessions_total",
            help: "Connections opened for a session (sessions, started or not), on /v1/stream and Deepgram's and OpenAI's routes.")
        uploads = registry.counter("steno_uploads_total", help: "Files posted to /v1/audio/transcriptions and /translations, by status.",
                                   labels: ["status"])
        handshakesRefused = registry.counter(
            "steno_handshakes_refused_total", help: "WebSocket handshakes refused, by reason.", labels: ["reason"])
        messagesRefused = registry.counter(
            "steno_messages_refused_total", help: "WebSockets closed 1013: the memory for unfinished messages was full.")
        viewersActive = registry.gauge("steno_viewers_active", help: "Broadcast viewers connected now.")
        audioReceivedSeconds = registry.counter(
            "steno_audio_received_seconds_total", help: "Seconds of audio received from clients.")
        audioAnalyzedSeconds = registry.counter(
            "steno_audio_analyzed_seconds_total", help: "Seconds of audio analyzed by the recognizers.")
        lagSeconds = registry.histogram(
            "steno_lag_seconds", help: "Audio received but not yet analyzed, in seconds, sampled at each tick (4 a second) per session with audio coming in or waiting.",
            buckets: Self.latencyBuckets)
        let eventsSent = registry.counter("steno_events_sent_total", help: "Events sent to clients, by type.", labels: ["type"])
        let errors = registry.counter("steno_errors_total", help: "Error events sent to clients, by code.", labels: ["code"])
        self.eventsSent = eventsSent
        self.errors = errors
        eventCounters = Dictionary(uniqueKeysWithValues: Self.eventTypes.map { ($0, eventsSent.labels($0)) })
        errorCounters = Dictionary(uniqueKeysWithValues: ErrorCode.allCases.map { ($0, errors.labels($0.rawValue)) })
        outboundQueueBytes = registry.gauge(
            "steno_outbound_queue_bytes", help: "Bytes of events waiting to be sent, all connections.")
        inboundBufferedAudioSeconds = registry.gauge(
            "steno_inbound_buffered_audio_seconds", help: "Seconds of audio received but not yet analyzed, all sessions.")
        sessionDurationSeconds = registry.histogram(
            "steno_session_duration_seconds", help: "Wall-clock duration of finished sessions.",
            buckets: Self.durationBuckets)
        endLatencySeconds = registry.histogram(
            "steno_end_latency_seconds", help: "Wall-clock time from receiving end to sending ended.",
            buckets: Self.latencyBuckets)
        recognizersCreated = registry.counter("steno_recognizers_created_total", help: "Speech recognizers created.")
        decodersCreated = registry.counter("steno_opus_decoders_created_total", help: "Opus decoders created.")
        admissionBusy = registry.gauge(
            "steno_admission_busy", help: "1 while new sessions are refused because the measured load is too high.")
        admissionUtilization = registry.gauge(
            "steno_admission_utilization",
            help: "Share of the workers' time the sessions' recent demand and one more talker would take; new sessions are refused above --admit-utilization.")
        admissionTalkerDemand = registry.gauge(
            "steno_admission_talker_demand", help: "Workers' time an average talker takes (share of one worker), as admission counts a newcomer.")
        admissionSpeechCost = registry.gauge(
            "steno_admission_speech_cost", help: "Workers' time per second of speech, measured over the sessions' lanes (what a talker costs while it speaks).")
        admissionSpeechFraction = registry.gauge(
            "steno_admission_speech_fraction", help: "Share of its time a talker speaks, measured over the sessions' utterances and pauses.")
        admissionNewcomersTalking = registry.gauge(
            "steno_admission_newcomers_talking", help: "Share of recent new sessions that spoke within their first seconds: what a new session counts as before it speaks.")
        stalledUtterances = registry.counter(
            "steno_stalled_utterances_total",
            help: "Utterances finalized because their audio stopped in the middle of speech, freeing a shared recognizer.")

        writeStalls = registry.counter(
            "steno_write_stalls_total",
            help: "Connections closed as slow consumers (4008) because their events waited --write-stall-seconds with nothing written.")

        for reason in Self.refusalReasons { _ = handshakesRefused.labels(reason) }
    }

    /// Counts an event sent to a client.
    public func eventSent(_ type: String) {
        (eventCounters[type] ?? eventsSent.labels(type)).increment()
    }

    /// Counts an `error` event.
    public func errorSent(_ code: ErrorCode) {
        (errorCounters[code] ?? errors.labels(code.rawValue)).increment()
    }

    /// Publishes `steno_sessions_active`, the transcription sessions open now (connected or
    /// detached, until the server forgets them), read from the sessions' registry at each
    /// scrape: the registry owns the count, the gauge keeps none of its own.
    func attach(sessions: SessionRegistry) {
        registry.sampledGauge("steno_sessions_active", help: "Transcription sessions open now.") { Double(sessions.count) }
    }

    /// Publishes the shared recognizers' state, read at each scrape: `steno_recognizers`
    /// (the most utterances recognized at once), `steno_recognizers_made` (how many exist
    /// now: fewer while they are being made after start, or with `--spare-recognizers`), `steno_recognizers_busy`,
    /// `steno_recognizer_waiting_sessions`.
    public func attach(engine: any SpeechEngine) {
        registry.sampledGauge("steno_recognizers", help: "Shared recognizers (decoders): the most utterances recognized at once.") {
            let capacity = engine.load.capacity
            return capacity == Int.max ? 0 : Double(capacity)
        }
        registry.sampledGauge("steno_recognizers_made", help: "Shared recognizers (decoders) that exist now; fewer than steno_recognizers while they are being made, or with --spare-recognizers.") {
            Double(engine.load.made)
        }
        registry.sampledGauge("steno_recognizers_busy", help: "Shared recognizers lent to an utterance now.") {
            Double(engine.load.busy)
        }
        registry.sampledGauge("steno_recognizer_waiting_sessions", help: "Sessions with speech waiting for a shared recognizer.") {
            Double(engine.load.waiting)
        }
        guard engine.workerStats != nil else { return }
        registry.sampledGauge("steno_engine_worker_ready", help: "1 while the engine's worker processes (Whisper) have their models loaded (or, started on demand, wait for their first request); 0 while one starts or restarts.") {
            engine.workerStats?.ready == true ? 1 : 0
        }
        registry.sampledCounter("steno_engine_worker_restarts_total", help: "Times the engine's worker process was started again after it died.") {
            Double(engine.workerStats?.restarts ?? 0)
        }
        registry.sampledGauge("steno_engine_worker_pending", help: "Requests sent to the engine's worker process and not answered yet.") {
            Double(engine.workerStats?.pending ?? 0)
        }
        registry.sampledGauge("steno_engine_worker_cpu_seconds", help: "CPU seconds the engine's worker process now running has used (it starts again from 0 when restarted).") {
            engine.workerStats?.cpuSeconds ?? 0
        }
    }

    /// Publishes the worker pool's state, read at each scrape:
    /// `steno_workers`, `steno_workers_busy`,
    /// `steno_worker_queue_depth` (jobs waiting in all lanes), `steno_worker_jobs_completed_total`,
    /// and the compute jobs' wall-clock and CPU seconds, `steno_worker_busy_seconds_total` and
    /// `steno_worker_cpu_seconds_total` (busy over CPU above 1: the workers wait for cores).
    public func attach(pool: WorkerPool) {
        registry.sampledGauge("steno_workers", help: "Worker threads for recognition work.") {
            Double(pool.workerCount)
        }
        registry.sampledGauge("steno_workers_busy", help: "Worker threads running a job now.") {
            Double(pool.stats.busyWorkers)
        }
        registry.sampledGauge("steno_worker_queue_depth", help: "Jobs waiting for a worker, all sessions.") {
            Double(pool.stats.queuedJobs)
        }
        registry.sampledCounter("steno_worker_jobs_completed_total", help: "Jobs the worker pool has completed.") {
            Double(pool.stats.completedJobs)
        }
        registry.sampledCounter("steno_worker_busy_seconds_total", help: "Wall-clock seconds worker threads spent in jobs (what admission counts).") {
            pool.stats.work.busy
        }
        registry.sampledCounter("steno_worker_cpu_seconds_total", help: "CPU seconds worker threads used in jobs.") {
            pool.stats.work.cpu
        }
    }
}
