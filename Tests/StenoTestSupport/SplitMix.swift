/// A small, fast, seedable generator (SplitMix64), for the tests' random scripts and data
/// and the benchmarks' pauses and noise: the same seed gives the same sequence in every run
/// and on every machine, so a failing seed can be run again.
public struct SplitMix: RandomNumberGenerator {
    private var state: UInt64

    public init(seed: UInt64) { state = seed }

    public mutating func next() -> UInt64 {
        state &+= 0x9E37_79B9_7F4A_7C15
        var z = state
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }

    /// Uniform in [0, 1): the top 53 bits, as many as a Double holds.
    public mutating func unit() -> Double { Double(next() >> 11) / Double(1 << 53) }
}
