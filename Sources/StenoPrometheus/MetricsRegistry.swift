// The registry: where metrics are registered (checked once, at start-up) and how all of
// them are printed for a scrape, plus the families printed by reading a closure. The
// metrics it hands out are in Metrics.swift, the text format in MetricsText.swift.

import StenoSystem

/// A small, thread-safe metrics registry that renders the Prometheus text exposition
/// format, version 0.0.4 (what `/metrics` serves).
///
/// Metrics are registered once, at start-up, and the returned objects are kept and updated
/// from any thread:
/// - ``Counter``: only goes up; its name must end in `_total`. `increment()` is one atomic
///   add; `add(_:)` with a fraction is a short compare-and-swap loop.
/// - ``Gauge``: goes up and down, or is set.
/// - ``Histogram``: counts observations into cumulative buckets, with `_sum` and `_count`
///   (a lock held for a few instructions per observation).
/// - Sampled metrics: a closure read at each scrape (queue depths, busy threads).
///
/// Families with labels hand out one child per combination of label values
/// (`family.labels("final")`); look a child up once and keep it on hot paths. Label values
/// should come from small fixed sets: after `maxSeries` combinations a family stops
/// creating new series, and further combinations update a child that is never exported,
/// so that no input can make the registry grow without bound.
///
/// Names are checked when registered: a name that breaks Prometheus' rules, a counter
/// without `_total`, or one name registered twice with different shapes is a programming
/// error and stops the process (registration happens with constants, at start-up).
public final class MetricsRegistry: Sendable {
    /// The `Content-Type` of ``exposition()``.
    public static let contentType = "text/plain; version=0.0.4; charset=utf-8"

    private let families = Locked<[any ExposedFamily]>([])
    /// Most series (label combinations) one family exports.
    public let maxSeries: Int

    public init(maxSeries: Int = 1000) {
        self.maxSeries = max(1, maxSeries)
    }

    // MARK: Registration

    /// A counter without labels.
    public func counter(_ name: String, help: String) -> Counter {
        counter(name, help: help, labels: []).labels([])
    }

    /// A family of counters, one per combination of values of `labels`.
    public func counter(_ name: String, help: String, labels: [String]) -> MetricFamily<Counter> {
        precondition(name.hasSuffix("_total"), "counter \(name) must end in _total")
        return register(name, help: help, kind: .counter, labels: labels) {
            MetricFamily<Counter>(name: name, help: help, kind: .counter, labelNames: labels, maxSeries: maxSeries) { Counter() }
        }
    }

    /// A gauge without labels.
    public func gauge(_ name: String, help: String) -> Gauge {
        gauge(name, help: help, labels: []).labels([])
    }

    /// A family of gauges, one per combination of values of `labels`.
    public func gauge(_ name: String, help: String, labels: [String]) -> MetricFamily<Gauge> {
        register(name, help: help, kind: .gauge, labels: labels) {
            MetricFamily<Gauge>(name: name, help: help, kind: .gauge, labelNames: labels, maxSeries: maxSeries) { Gauge() }
        }
    }

    /// A histogram without labels. `buckets` are upper bounds; they are sorted, repeats
    /// and non-finite values are dropped, and `+Inf` is always added.
    public func histogram(_ name: String, help: String, buckets: [Double]) -> Histogram {
        histogram(name, help: help, labels: [], buckets: buckets).labels([])
    }

    /// A family of histograms with the same buckets.
    public func histogram(
        _ name: String, help: String, labels: [String], buckets: [Double]
    ) -> MetricFamily<Histogram> {
        precondition(!labels.contains("le"), "histogram \(name) cannot have a label named le")
        let bounds = Histogram.normalise(buckets)
        return register(name, help: help, kind: .histogram, labels: labels) {
            MetricFamily<Histogram>(name: name, help: help, kind: .histogram, labelNames: labels, maxSeries: maxSeries) {
                Histogram(upperBounds: bounds)
            }
        }
    }

    /// A gauge whose value is read from `value` at each scrape. The closure runs on the
    /// scraping thread, outside the registry's lock; it must be quick and must not block.
    public func sampledGauge(_ name: String, help: String, value: @escaping @Sendable () -> Double) {
        let family = SampledFamily(name: name, help: help, kind: .gauge, read: value)
        _ = register(name, help: help, kind: .gauge, labels: []) { family }
    }

    /// A counter whose value is read from `value` at each scrape (for a total kept
    /// elsewhere, such as the worker pool's completed jobs).
    public func sampledCounter(_ name: String, help: String, value: @escaping @Sendable () -> Double) {
        precondition(name.hasSuffix("_total"), "counter \(name) must end in _total")
        let family = SampledFamily(name: name, help: help, kind: .counter, read: value)
        _ = register(name, help: help, kind: .counter, labels: []) { family }
    }

    private func register<Family: ExposedFamily>(
        _ name: String, help: String, kind: MetricKind, labels: [String], make: () -> Family
    ) -> Family {
        precondition(MetricsText.isValidMetricName(name), "invalid metric name \(name)")
        for label in labels {
            precondition(MetricsText.isValidLabelName(label), "invalid label name \(label) in \(name)")
        }
        precondition(Set(labels).count == labels.count, "repeated label name in \(name)")
        return families.withLock { families in
            if let existing = families.first(where: { $0.name == name }) {
                // Registering the same metric twice returns the first registration.
                guard let same = existing as? Family, existing.kind == kind, existing.labelNames == labels else {
                    preconditionFailure("metric \(name) registered twice with different shapes")
                }
                return same
            }
            let family = make()
            families.append(family)
            return family
        }
    }

    // MARK: Exposition

    /// Every metric in the text exposition format 0.0.4, in registration order; series of
    /// a family sorted by label values. Families with labels but no series yet are left out.
    public func exposition() -> String {
        let snapshot = families.withLock { $0 }
        var text = ""
        for family in snapshot {
            family.write(into: &text)
        }
        return text
    }
}

/// The kinds of metric the registry produces (the `# TYPE` line).
public enum MetricKind: String, Sendable {
    case counter, gauge, histogram
}

/// What the registry needs from a family to print it.
private protocol ExposedFamily: AnyObject, Sendable {
    var name: String { get }
    var labelNames: [String] { get }
    var kind: MetricKind { get }
    func write(into text: inout String)
}

extension MetricFamily: ExposedFamily {
    fileprivate func write(into text: inout String) {
        let series = self.series
        if series.isEmpty { return }
        MetricsText.header(name: name, help: help, kind: kind, into: &text)
        for (values, child) in series {
            let labels = Array(zip(labelNames, values))
            switch child {
            case let counter as Counter:
                MetricsText.sample(name, labels: labels, value: counter.value, into: &text)
            case let gauge as Gauge:
                MetricsText.sample(name, labels: labels, value: gauge.value, into: &text)
            case let histogram as Histogram:
                let (cumulative, sum) = histogram.snapshot
                for (index, count) in cumulative.enumerated() {
                    let bound = index < histogram.upperBounds.count ? histogram.upperBounds[index] : .infinity
                    MetricsText.sample(name + "_bucket", labels: labels + [("le", MetricsText.number(bound))],
                                       value: Double(count), into: &text)
                }
                MetricsText.sample(name + "_sum", labels: labels, value: sum, into: &text)
                MetricsText.sample(name + "_count", labels: labels, value: Double(cumulative.last ?? 0), into: &text)
            default:
                break
            }
        }
    }
}

private final class SampledFamily: ExposedFamily {
    let name: String
    let help: String
    let kind: MetricKind
    let read: @Sendable () -> Double
    var labelNames: [String] { [] }

    init(name: String, help: String, kind: MetricKind, read: @escaping @Sendable () -> Double) {
        self.name = name
        self.help = help
        self.kind = kind
        self.read = read
    }

    func write(into text: inout String) {
        MetricsText.header(name: name, help: help, kind: kind, into: &text)
        MetricsText.sample(name, labels: [], value: read(), into: &text)
    }
}
