import StenoSystem
import Synchronization

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

/// A counter: a value that only goes up.
public final class Counter: Sendable {
    private let whole = Atomic<Int>(0)
    private let fraction = AtomicDouble()

    init() {}

    /// Adds one.
    public func increment() {
        whole.add(1, ordering: .relaxed)
    }

    /// Adds `amount`. Negative, infinite and NaN amounts are ignored: a counter never
    /// goes down.
    public func add(_ amount: Double) {
        guard amount > 0, amount.isFinite else { return }
        if amount == amount.rounded(), amount < 1e15 {
            whole.add(Int(amount), ordering: .relaxed)
        } else {
            fraction.add(amount)
        }
    }

    /// Adds `amount` (negative amounts are ignored).
    public func add(_ amount: Int) {
        guard amount > 0 else { return }
        whole.add(amount, ordering: .relaxed)
    }

    /// The current value.
    public var value: Double {
        Double(whole.load(ordering: .relaxed)) + fraction.load()
    }
}

/// A gauge: a value that goes up and down.
public final class Gauge: Sendable {
    private let current = AtomicDouble()

    init() {}

    public func set(_ value: Double) { current.store(value) }
    public func set(_ value: Int) { current.store(Double(value)) }
    public func add(_ amount: Double) { current.add(amount) }
    public func add(_ amount: Int) { current.add(Double(amount)) }
    public func increment() { current.add(1) }
    public func decrement() { current.add(-1) }

    /// The current value.
    public var value: Double { current.load() }
}

/// A histogram: observations counted into buckets by upper bound, plus their sum.
public final class Histogram: Sendable {
    /// Finite upper bounds, ascending; `+Inf` is implied.
    public let upperBounds: [Double]
    private let state: Locked<(counts: [Int], sum: Double)>

    init(upperBounds: [Double]) {
        self.upperBounds = upperBounds
        state = Locked((counts: Array(repeating: 0, count: upperBounds.count + 1), sum: 0))
    }

    /// Records one observation. NaN is ignored.
    public func observe(_ value: Double) {
        guard !value.isNaN else { return }
        // The first bucket whose bound is >= value; the last slot is +Inf.
        var low = 0
        var high = upperBounds.count
        while low < high {
            let middle = (low + high) / 2
            if upperBounds[middle] < value { low = middle + 1 } else { high = middle }
        }
        let slot = low
        state.withLock { state in
            state.counts[slot] += 1
            state.sum += value
        }
    }

    /// Records a duration in seconds.
    public func observe(_ duration: Duration) {
        let (seconds, attoseconds) = duration.components
        observe(Double(seconds) + Double(attoseconds) * 1e-18)
    }

    /// Cumulative counts per bound (the last is `+Inf`, the total count) and the sum.
    public var snapshot: (cumulative: [Int], sum: Double) {
        let (counts, sum) = state.withLock { ($0.counts, $0.sum) }
        var running = 0
        let cumulative = counts.map { count -> Int in
            running += count
            return running
        }
        return (cumulative, sum)
    }

    static func normalise(_ buckets: [Double]) -> [Double] {
        Array(Set(buckets.filter { $0.isFinite })).sorted()
    }
}

/// The series of one metric, one per combination of label values.
public final class MetricFamily<Child: Sendable & AnyObject>: Sendable {
    public let name: String
    public let help: String
    public let labelNames: [String]
    public let kind: MetricKind
    private let maxSeries: Int
    private let make: @Sendable () -> Child
    private let children = Locked<[[String]: Child]>([:])
    /// Takes the updates of label combinations beyond `maxSeries`; never exported.
    private let overflow: Child

    init(
        name: String, help: String, kind: MetricKind, labelNames: [String], maxSeries: Int,
        make: @escaping @Sendable () -> Child
    ) {
        self.name = name
        self.help = help
        self.kind = kind
        self.labelNames = labelNames
        self.maxSeries = maxSeries
        self.make = make
        overflow = make()
    }

    /// The series for these label values, in the order of the family's label names.
    public func labels(_ values: String...) -> Child {
        labels(values)
    }

    /// The series for these label values, in the order of the family's label names.
    public func labels(_ values: [String]) -> Child {
        precondition(values.count == labelNames.count,
                     "\(name) takes \(labelNames.count) label values, not \(values.count)")
        return children.withLock { children in
            if let child = children[values] { return child }
            guard children.count < maxSeries else { return overflow }
            let child = make()
            children[values] = child
            return child
        }
    }

    fileprivate var series: [(labels: [String], child: Child)] {
        children.withLock { children in
            children.map { (labels: $0.key, child: $0.value) }
        }
        .sorted { $0.labels.lexicographicallyPrecedes($1.labels) }
    }
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

/// The pieces of the text format.
enum MetricsText {
    static func header(name: String, help: String, kind: MetricKind, into text: inout String) {
        text += "# HELP \(name) \(escapeHelp(help))\n"
        text += "# TYPE \(name) \(kind.rawValue)\n"
    }

    static func sample(_ name: String, labels: [(String, String)], value: Double, into text: inout String) {
        text += name
        if !labels.isEmpty {
            text += "{"
            text += labels.map { "\($0.0)=\"\(escapeLabelValue($0.1))\"" }.joined(separator: ",")
            text += "}"
        }
        text += " \(number(value))\n"
    }

    /// A sample value or `le` bound: integers without a fraction, `+Inf`, `-Inf`, `NaN`,
    /// otherwise Swift's shortest round-tripping form (`0.25`, `1e-05`).
    static func number(_ value: Double) -> String {
        if value.isNaN { return "NaN" }
        if value == .infinity { return "+Inf" }
        if value == -.infinity { return "-Inf" }
        if value == value.rounded(), abs(value) < 1e15 { return String(Int64(value)) }
        return "\(value)"
    }

    /// In label values: backslash, double quote and line feed are escaped.
    static func escapeLabelValue(_ value: String) -> String {
        var escaped = ""
        escaped.reserveCapacity(value.utf8.count)
        for character in value.unicodeScalars {
            switch character {
            case "\\": escaped += "\\\\"
            case "\"": escaped += "\\\""
            case "\n": escaped += "\\n"
            default: escaped.unicodeScalars.append(character)
            }
        }
        return escaped
    }

    /// In `# HELP` text: backslash and line feed are escaped.
    static func escapeHelp(_ help: String) -> String {
        var escaped = ""
        for character in help.unicodeScalars {
            switch character {
            case "\\": escaped += "\\\\"
            case "\n": escaped += "\\n"
            default: escaped.unicodeScalars.append(character)
            }
        }
        return escaped
    }

    /// `[a-zA-Z_:][a-zA-Z0-9_:]*`
    static func isValidMetricName(_ name: String) -> Bool {
        isName(name, allowColon: true)
    }

    /// `[a-zA-Z_][a-zA-Z0-9_]*`, not starting with `__` (reserved).
    static func isValidLabelName(_ name: String) -> Bool {
        isName(name, allowColon: false) && !name.hasPrefix("__")
    }

    private static func isName(_ name: String, allowColon: Bool) -> Bool {
        guard let first = name.utf8.first else { return false }
        func isLetter(_ c: UInt8) -> Bool { (c >= 65 && c <= 90) || (c >= 97 && c <= 122) || c == 95 || (allowColon && c == 58) }
        func isDigit(_ c: UInt8) -> Bool { c >= 48 && c <= 57 }
        return isLetter(first) && name.utf8.allSatisfy { isLetter($0) || isDigit($0) }
    }
}

/// A Double updated atomically through its bit pattern.
final class AtomicDouble: Sendable {
    private let bits = Atomic<UInt64>(0)

    func load() -> Double { Double(bitPattern: bits.load(ordering: .relaxed)) }

    func store(_ value: Double) { bits.store(value.bitPattern, ordering: .relaxed) }

    func add(_ amount: Double) {
        var old = bits.load(ordering: .relaxed)
        while true {
            let new = (Double(bitPattern: old) + amount).bitPattern
            let (exchanged, original) = bits.compareExchange(
                expected: old, desired: new, ordering: .relaxed)
            if exchanged { return }
            old = original
        }
    }
}

/// Checks on the text format, for tests of what a registry exposes.
public enum MetricsExposition {
    /// Whether `line` is a sample line as the 0.0.4 text format allows it:
    /// `name{label="value",…} number` (for tests of what a registry prints).
    public static func isSampleLine(_ line: Substring) -> Bool {
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
