import StenoCore
import StenoPrometheus
import StenoSpeech
import StenoSystem
import StenoWorkers
import Testing
@testable import StenoServer

/// Steno's own series, as /metrics publishes them.
@Suite struct StenoMetricsTests {
    @Test func stenoMetricsPublishWellFormedSeries() {
        let metrics = StenoMetrics()
        let pool = WorkerPool(workers: 2)
        metrics.attach(pool: pool)
        metrics.attach(sessions: SessionRegistry())
        metrics.sessionsTotal.increment()
        metrics.audioReceivedSeconds.add(1.5)
        metrics.audioAnalyzedSeconds.add(1.25)
        metrics.lagSeconds.observe(0.25)
        metrics.eventSent("final")
        metrics.errorSent(.badAudio)
        metrics.handshakesRefused.labels("capacity").increment()
        metrics.sessionDurationSeconds.observe(Duration.seconds(12))
        metrics.endLatencySeconds.observe(0.4)
        metrics.recognizersCreated.increment()
        metrics.decodersCreated.increment()
        metrics.outboundQueueBytes.add(512)
        metrics.inboundBufferedAudioSeconds.add(2.5)
        metrics.viewersActive.set(3)
        #expect(pool.shutdown(.drain, timeout: .seconds(60)))

        let text = metrics.registry.exposition()
        var types: [String: String] = [:]
        for line in text.split(separator: "\n", omittingEmptySubsequences: false).dropLast() {
            if line.hasPrefix("# TYPE ") {
                let parts = line.split(separator: " ")
                #expect(parts.count == 4)
                if parts.count == 4 { types[String(parts[2])] = String(parts[3]) }
            } else if !line.hasPrefix("# HELP ") {
                #expect(MetricsExposition.isSampleLine(line), "malformed: \(line)")
            }
        }
        for (name, type) in types {
            #expect(name.hasPrefix("steno_"))
            if type == "counter" { #expect(name.hasSuffix("_total")) }
        }
        #expect(types["steno_sessions_active"] == "gauge")
        #expect(types["steno_lag_seconds"] == "histogram")
        #expect(types["steno_worker_queue_depth"] == "gauge")
        #expect(types["steno_worker_jobs_completed_total"] == "counter")
        #expect(text.contains("steno_audio_received_seconds_total 1.5\n"))
        #expect(text.contains("steno_events_sent_total{type=\"final\"} 1\n"))
        #expect(text.contains("steno_events_sent_total{type=\"volatile\"} 0\n"))
        #expect(text.contains("steno_errors_total{code=\"bad_audio\"} 1\n"))
        for code in ErrorCode.allCases {
            #expect(text.contains("steno_errors_total{code=\"\(code.rawValue)\"}"))
        }
        #expect(text.contains("steno_handshakes_refused_total{reason=\"capacity\"} 1\n"))
        #expect(text.contains("steno_session_duration_seconds_bucket{le=\"15\"} 1\n"))
        #expect(text.contains("steno_end_latency_seconds_count 1\n"))
        #expect(text.contains("steno_workers 2\n"))
        #expect(text.contains("steno_workers_busy 0\n"))
        #expect(text.contains("steno_worker_queue_depth 0\n"))
        #expect(text.contains("steno_viewers_active 3\n"))
    }

    /// The recognizer gauges read the engine's load at each scrape, so a server whose shared
    /// decoders are still being made after start says so (a benchmark waits on it).
    @Test func recognizerGaugesFollowTheEnginesLoad() {
        let engine = FixedLoadEngine(RecognizerLoad(capacity: 8, busy: 2, waiting: 1, made: 3))
        let metrics = StenoMetrics()
        metrics.attach(engine: engine)
        var text = metrics.registry.exposition()
        #expect(text.contains("# TYPE steno_recognizers_made gauge\n"))
        #expect(text.contains("steno_recognizers 8\n"))
        #expect(text.contains("steno_recognizers_made 3\n"))
        #expect(text.contains("steno_recognizers_busy 2\n"))
        #expect(text.contains("steno_recognizer_waiting_sessions 1\n"))
        engine.current.withLock { $0.made = 8 }
        text = metrics.registry.exposition()
        #expect(text.contains("steno_recognizers_made 8\n"))
    }

}

/// An engine that recognizes nothing and reports the load it is given.
private final class FixedLoadEngine: SpeechEngine {
    let info = SpeechEngineInfo(name: "fixed", version: "1", model: "test", language: "en-US", sampleRate: 16000)
    let current: Locked<RecognizerLoad>

    init(_ load: RecognizerLoad) {
        current = Locked(load)
    }

    var load: RecognizerLoad { current.withLock { $0 } }

    func makeRecognizer(options: RecognizerOptions, wake: @escaping @Sendable () -> Void) throws(StenoError) -> any SpeechRecognizer {
        throw StenoError(.internal, "this engine recognizes nothing")
    }
}
