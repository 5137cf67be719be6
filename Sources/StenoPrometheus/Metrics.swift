// What a registry hands out and the code updates from any thread: `Counter`, `Gauge`,
// `Histogram`, the family that makes one per combination of label values (`MetricFamily`),
// and the atomic Double the counters and gauges are built on.

import StenoSystem
import Synchronization

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

    var series: [(labels: [String], child: Child)] {
        children.withLock { children in
            children.map { (labels: $0.key, child: $0.value) }
        }
        .sorted { $0.labels.lexicographicallyPrecedes($1.labels) }
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
