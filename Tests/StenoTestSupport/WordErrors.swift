/// Word error rate of `heard` against `reference`: the word edit distance over the
/// reference's length (what the accuracy tests of both engines compare with a bound).
public func wordErrorRate(_ heard: [String], _ reference: [String]) -> Double {
    var row = Array(0...heard.count)
    for (i, r) in reference.enumerated() {
        var next = [i + 1] + [Int](repeating: 0, count: heard.count)
        for (j, h) in heard.enumerated() { next[j + 1] = min(row[j] + (r == h ? 0 : 1), row[j + 1] + 1, next[j] + 1) }
        row = next
    }
    return Double(row[heard.count]) / Double(max(1, reference.count))
}
