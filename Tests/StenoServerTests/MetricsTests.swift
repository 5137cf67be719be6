import Dispatch
import StenoCore
import Testing
@testable import StenoServer

@Suite struct MetricsTests {
    @Test func expositionMatchesTheTextFormat() {
        let registry = MetricsRegistry()
        let requests = registry.counter("demo_requests_total", help: "Requests handled.")
        requests.increment()
        requests.add(2)
        let temperature = registry.gauge("demo_temperature", help: "Line one\nwith a \\ backslash")
        temperature.set(-1.5)
        let events = registry.counter("demo_events_total", help: "Events.", labels: ["type", "path"])
        events.labels("b", "/x").add(3)
        events.labels("a", "q\"u\\o\nte").increment()
        let latency = registry.histogram(
            "demo_latency_seconds", help: "Latency.", buckets: [1, 0.5, 0.5, .infinity, .nan])
        for value in [0.25, 0.5, 0.75, 3] { latency.observe(value) }
        _ = registry.counter("demo_unused_total", help: "No series yet.", labels: ["kind"])
        registry.sampledGauge("demo_sampled", help: "Read at scrape time.") { 7 }

        let expected = """
            # HELP demo_requests_total Requests handled.
            # TYPE demo_requests_total counter
            demo_requests_total 3
            # HELP demo_temperature Line one\\nwith a \\\\ backslash
            # TYPE demo_temperature gauge
            demo_temperature -1.5
            # HELP demo_events_total Events.
            # TYPE demo_events_total counter
            demo_events_total{type="a",path="q\\"u\\\\o\\nte"} 1
            demo_events_total{type="b",path="/x"} 3
            # HELP demo_latency_seconds Latency.
            # TYPE demo_latency_seconds histogram
            demo_latency_seconds_bucket{le="0.5"} 2
            demo_latency_seconds_bucket{le="1"} 3
            demo_latency_seconds_bucket{le="+Inf"} 4
            demo_latency_seconds_sum 4.5
            demo_latency_seconds_count 4
            # HELP demo_sampled Read at scrape time.
            # TYPE demo_sampled gauge
            demo_sampled 7

            """
        #expect(registry.exposition() == expected)
    }

    @Test func labelledHistogramsPutLeAfterTheOtherLabels() {
        let registry = MetricsRegistry()
        let family = registry.histogram("demo_size_bytes", help: "Sizes.", labels: ["kind"], buckets: [10])
        family.labels("pcm").observe(5)
        family.labels("opus").observe(50)
        let expected = """
            # HELP demo_size_bytes Sizes.
            # TYPE demo_size_bytes histogram
            demo_size_bytes_bucket{kind="opus",le="10"} 0
            demo_size_bytes_bucket{kind="opus",le="+Inf"} 1
            demo_size_bytes_sum{kind="opus"} 50
            demo_size_bytes_count{kind="opus"} 1
            demo_size_bytes_bucket{kind="pcm",le="10"} 1
            demo_size_bytes_bucket{kind="pcm",le="+Inf"} 1
            demo_size_bytes_sum{kind="pcm"} 5
            demo_size_bytes_count{kind="pcm"} 1

            """
        #expect(registry.exposition() == expected)
    }

    @Test func labelValuesAndHelpAreEscaped() {
        #expect(MetricsText.escapeLabelValue(#"plain"#) == #"plain"#)
        #expect(MetricsText.escapeLabelValue(#"a"b"#) == #"a\"b"#)
        #expect(MetricsText.escapeLabelValue(#"a\b"#) == #"a\\b"#)
        #expect(MetricsText.escapeLabelValue("a\nb") == #"a\nb"#)
        #expect(MetricsText.escapeLabelValue(#"\"\n"# + "\n") == #"\\\"\\n\n"#)
        #expect(MetricsText.escapeLabelValue("ünï cödé ✓") == "ünï cödé ✓")
        // Help text keeps double quotes as they are.
        #expect(MetricsText.escapeHelp("say \"hi\"\\\n") == #"say "hi"\\\n"#)
    }

    @Test func numbersUseThePrometheusSpelling() {
        #expect(MetricsText.number(0) == "0")
        #expect(MetricsText.number(-0.0) == "0")
        #expect(MetricsText.number(42) == "42")
        #expect(MetricsText.number(0.25) == "0.25")
        #expect(MetricsText.number(-3.5) == "-3.5")
        #expect(MetricsText.number(1e-5) == "1e-05")
        #expect(MetricsText.number(.infinity) == "+Inf")
        #expect(MetricsText.number(-.infinity) == "-Inf")
        #expect(MetricsText.number(.nan) == "NaN")
    }

    @Test func namesAreChecked() {
        #expect(MetricsText.isValidMetricName("steno_sessions_total"))
        #expect(MetricsText.isValidMetricName("a:b_c9"))
        #expect(MetricsText.isValidMetricName("_x"))
        #expect(!MetricsText.isValidMetricName(""))
        #expect(!MetricsText.isValidMetricName("9lives"))
        #expect(!MetricsText.isValidMetricName("has-dash"))
        #expect(!MetricsText.isValidMetricName("spa ce"))
        #expect(MetricsText.isValidLabelName("code"))
        #expect(!MetricsText.isValidLabelName("a:b"))
        #expect(!MetricsText.isValidLabelName("__reserved"))
        #expect(!MetricsText.isValidLabelName("é"))
    }

    @Test func countersNeverGoDown() {
        let counter = MetricsRegistry().counter("demo_total", help: "x")
        counter.add(2.5)
        counter.add(-1)
        counter.add(.nan)
        counter.add(.infinity)
        counter.add(-4 as Int)
        #expect(counter.value == 2.5)
    }

    @Test func histogramsIgnoreNaNAndTakeDurations() {
        let histogram = MetricsRegistry().histogram("demo_seconds", help: "x", buckets: [1, 2])
        histogram.observe(.nan)
        histogram.observe(Duration.milliseconds(1500))
        histogram.observe(.infinity)
        let (cumulative, _) = histogram.snapshot
        #expect(cumulative == [0, 1, 2])
    }

    @Test func registeringTwiceReturnsTheSameMetric() {
        let registry = MetricsRegistry()
        let first = registry.counter("demo_total", help: "x")
        let second = registry.counter("demo_total", help: "x")
        first.increment()
        #expect(second.value == 1)
        #expect(first === second)
    }

    @Test func aFamilyStopsAddingSeriesAtItsLimit() {
        let registry = MetricsRegistry(maxSeries: 2)
        let family = registry.counter("demo_total", help: "x", labels: ["v"])
        for value in ["a", "b", "c", "d"] { family.labels(value).increment() }
        let text = registry.exposition()
        #expect(text.contains("demo_total{v=\"a\"} 1"))
        #expect(text.contains("demo_total{v=\"b\"} 1"))
        #expect(!text.contains("v=\"c\""))
        #expect(!text.contains("v=\"d\""))
    }

    @Test func concurrentUpdatesAddUp() {
        let registry = MetricsRegistry()
        let counter = registry.counter("demo_total", help: "x")
        let fractional = registry.counter("demo_seconds_total", help: "x")
        let gauge = registry.gauge("demo_open", help: "x")
        let histogram = registry.histogram("demo_latency_seconds", help: "x", buckets: [0.5])
        let family = registry.counter("demo_by_code_total", help: "x", labels: ["code"])
        let threads = 8
        let rounds = 10_000
        DispatchQueue.concurrentPerform(iterations: threads) { thread in
            for round in 0..<rounds {
                counter.increment()
                fractional.add(0.25)
                gauge.increment()
                gauge.add(-1.0)
                histogram.observe(round % 2 == 0 ? 0.25 : 1)
                family.labels(thread % 2 == 0 ? "even" : "odd").increment()
            }
        }
        let total = Double(threads * rounds)
        #expect(counter.value == total)
        #expect(fractional.value == total * 0.25)
        #expect(gauge.value == 0)
        let (cumulative, sum) = histogram.snapshot
        #expect(cumulative == [threads * rounds / 2, threads * rounds])
        #expect(sum == Double(threads * rounds / 2) * 1.25)
        #expect(family.labels("even").value + family.labels("odd").value == total)
    }

    @Test func stenoMetricsPublishWellFormedSeries() {
        let metrics = StenoMetrics()
        let pool = WorkerPool(workers: 2, preparers: 1)
        metrics.attach(pool: pool)
        metrics.sessionsActive.increment()
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
                #expect(Self.isSampleLine(line), "malformed: \(line)")
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

    /// `name{label="value",…} number`, as the 0.0.4 text format allows it.
    private static func isSampleLine(_ line: Substring) -> Bool {
        guard let space = line.lastIndex(of: " ") else { return false }
        let series = line[..<space]
        let value = line[line.index(after: space)...]
        guard ["+Inf", "-Inf", "NaN"].contains(value) || Double(value) != nil else { return false }
        guard let brace = series.firstIndex(of: "{") else {
            return MetricsText.isValidMetricName(String(series))
        }
        guard series.last == "}", MetricsText.isValidMetricName(String(series[..<brace])) else { return false }
        // Walk label="value" pairs, honouring escapes inside values.
        var rest = series[series.index(after: brace)..<series.index(before: series.endIndex)]
        while !rest.isEmpty {
            guard let equals = rest.firstIndex(of: "="), MetricsText.isValidLabelName(String(rest[..<equals])) else {
                return false
            }
            rest = rest[rest.index(after: equals)...]
            guard rest.first == "\"" else { return false }
            rest = rest.dropFirst()
            var closed = false
            while let character = rest.first {
                rest = rest.dropFirst()
                if character == "\\" {
                    guard let escaped = rest.first, ["\\", "\"", "n"].contains(escaped) else { return false }
                    rest = rest.dropFirst()
                } else if character == "\"" {
                    closed = true
                    break
                } else if character == "\n" {
                    return false
                }
            }
            guard closed else { return false }
            if rest.first == "," { rest = rest.dropFirst() } else if !rest.isEmpty { return false }
        }
        return true
    }
}
