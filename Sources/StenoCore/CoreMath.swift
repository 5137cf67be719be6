/// Rounding without libm.
///
/// `Double.rounded(_:)` compiles to calls into libm (`round`, `floor`, …) on Linux, and
/// StenoCore links nothing but the Swift runtime, so binaries that link only StenoCore fail
/// with "undefined reference to 'round'". Conversions to and from `Int64` are native
/// instructions; these helpers build what StenoCore needs from them.
enum CoreMath {
    /// Magnitude below which every `Double` converts to `Int64` without trapping.
    static let safeMagnitude = 9.0e18

    /// The nearest integer, halves away from zero; nil for non-finite or |x| ≥ 9e18.
    static func nearest(_ x: Double) -> Int64? {
        guard x.isFinite, x.magnitude < safeMagnitude else { return nil }
        let truncated = Int64(x)  // toward zero
        let fraction = x - Double(truncated)  // exact for every x in range
        if fraction >= 0.5 { return truncated + 1 }
        if fraction <= -0.5 { return truncated - 1 }
        return truncated
    }

    /// The largest integer ≤ x; nil for non-finite or |x| ≥ 9e18.
    static func floor(_ x: Double) -> Int64? {
        guard x.isFinite, x.magnitude < safeMagnitude else { return nil }
        let truncated = Int64(x)
        return Double(truncated) > x ? truncated - 1 : truncated
    }

    /// x as an integer when it has no fractional part; nil otherwise or when |x| ≥ 9e18.
    static func exactInteger(_ x: Double) -> Int64? {
        guard x.isFinite, x.magnitude < safeMagnitude else { return nil }
        let truncated = Int64(x)
        return Double(truncated) == x ? truncated : nil
    }

    /// Whether x has no fractional part (true for every finite |x| ≥ 2^52 as well).
    static func isIntegral(_ x: Double) -> Bool {
        guard x.isFinite else { return false }
        return x.magnitude >= 4_503_599_627_370_496 || exactInteger(x) != nil
    }
}

extension Duration {
    /// The duration in seconds, as a Double (options, metrics, logs).
    public var inSeconds: Double {
        let (seconds, attoseconds) = components
        return Double(seconds) + Double(attoseconds) / 1e18
    }
}
