import Dispatch
import Testing
@testable import StenoPrometheus

@Suite struct MetricsRegistryTests {
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

}
