import Foundation
import Testing

/// The broadcast caption rules, checked on a WebVTT or SRT file (or an HLS segment) as a
/// reader gets it: cues of 1 to 7 s (the last may be shorter), in order, not overlapping,
/// at most two lines of at most 42 characters (a single longer word may have a line).
func expectCaptionRules(_ file: String, _ what: String, minDuration: Double = 1, maxDuration: Double = 7,
                        maxLines: Int = 2, maxLineLength: Int = 42, sourceLocation: SourceLocation = #_sourceLocation) {
    let cues = parseCues(file)
    var previousEnd = -Double.infinity
    for (index, cue) in cues.enumerated() {
        let duration = cue.end - cue.start
        if index < cues.count - 1 {
            #expect(duration >= minDuration - 0.0005, "\(what): a cue of \(duration) s: \(cue)", sourceLocation: sourceLocation)
        }
        #expect(duration <= maxDuration + 0.0005, "\(what): a cue of \(duration) s: \(cue)", sourceLocation: sourceLocation)
        #expect(cue.start >= previousEnd, "\(what): cues overlap at \(cue)", sourceLocation: sourceLocation)
        #expect((1...maxLines).contains(cue.lines.count), "\(what): \(cue)", sourceLocation: sourceLocation)
        for line in cue.lines where line.contains(" ") {
            #expect(line.count <= maxLineLength, "\(what): a line of \(line.count): \(line)", sourceLocation: sourceLocation)
        }
        previousEnd = cue.end
    }
}

/// The cues of a WebVTT or SRT text: times in seconds and lines.
func parseCues(_ file: String) -> [(start: Double, end: Double, lines: [String])] {
    func seconds(_ text: Substring) -> Double? {
        let parts = text.replacingOccurrences(of: ",", with: ".").split(separator: ":")
        guard parts.count == 3, let h = Double(parts[0]), let m = Double(parts[1]), let s = Double(parts[2]) else { return nil }
        return h * 3600 + m * 60 + s
    }
    var cues: [(Double, Double, [String])] = []
    for block in file.replacingOccurrences(of: "\r\n", with: "\n").components(separatedBy: "\n\n") {
        let lines = block.split(separator: "\n", omittingEmptySubsequences: true)
        guard let timing = lines.firstIndex(where: { $0.contains(" --> ") }) else { continue }
        let ends = lines[timing].components(separatedBy: " --> ")
        guard ends.count == 2, let start = seconds(Substring(ends[0])), let end = seconds(Substring(ends[1].split(separator: " ")[0])) else { continue }
        cues.append((start, end, lines[(timing + 1)...].map(String.init)))
    }
    return cues
}
