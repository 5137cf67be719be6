// What the speech benchmark (SpeechBench.swift, SpeechOptions.swift) stands on: word
// alignment, its WAV and raw files, thread CPU and RSS, and its tables.

import Foundation

// MARK: - Word alignment

struct Alignment {
    var errors: Int
    var referenceCount: Int
    /// For each hypothesis word: whether it matched the reference word it was aligned with.
    var hypothesisCorrect: [Bool]
}

/// Levenshtein alignment of word sequences, with a backtrace to mark correct hypothesis words.
func align(reference: [String], hypothesis: [String]) -> Alignment {
    let n = reference.count
    let m = hypothesis.count
    var cost = [[Int]](repeating: [Int](repeating: 0, count: m + 1), count: n + 1)
    for i in 0...n { cost[i][0] = i }
    for j in 0...m { cost[0][j] = j }
    if n > 0 && m > 0 {
        for i in 1...n {
            for j in 1...m {
                let substitution = cost[i - 1][j - 1] + (reference[i - 1] == hypothesis[j - 1] ? 0 : 1)
                cost[i][j] = min(substitution, cost[i - 1][j] + 1, cost[i][j - 1] + 1)
            }
        }
    }
    var correct = [Bool](repeating: false, count: m)
    var i = n
    var j = m
    while i > 0 && j > 0 {
        let same = reference[i - 1] == hypothesis[j - 1]
        if cost[i][j] == cost[i - 1][j - 1] + (same ? 0 : 1) {
            correct[j - 1] = same
            i -= 1
            j -= 1
        } else if cost[i][j] == cost[i - 1][j] + 1 {
            i -= 1
        } else {
            j -= 1
        }
    }
    return Alignment(errors: cost[n][m], referenceCount: n, hypothesisCorrect: correct)
}

// MARK: - WAV files

enum BenchWAV {
    /// 16-bit PCM mono 16 kHz RIFF/WAVE.
    static func load(_ path: String, name: String, reference: String?) throws -> BenchFile {
        let bytes = [UInt8](try Data(contentsOf: URL(fileURLWithPath: path)))
        func u32(_ at: Int) -> Int { Int(bytes[at]) | Int(bytes[at + 1]) << 8 | Int(bytes[at + 2]) << 16 | Int(bytes[at + 3]) << 24 }
        func u16(_ at: Int) -> Int { Int(bytes[at]) | Int(bytes[at + 1]) << 8 }
        guard bytes.count >= 12, bytes[0..<4] == [0x52, 0x49, 0x46, 0x46] else { throw BenchError("\(path): not a WAV file") }
        var offset = 12
        var format: (rate: Int, channels: Int, bits: Int)?
        while offset + 8 <= bytes.count {
            let id = String(decoding: bytes[offset..<offset + 4], as: UTF8.self)
            let size = u32(offset + 4)
            let body = offset + 8
            guard body + size <= bytes.count else { throw BenchError("\(path): truncated") }
            if id == "fmt " && size >= 16 {
                format = (u32(body + 4), u16(body + 2), u16(body + 14))
            } else if id == "data" {
                guard let format, format == (16000, 1, 16) else { throw BenchError("\(path): need 16-bit mono 16 kHz") }
                let samples = (0..<size / 2).map { Int16(bitPattern: UInt16(bytes[body + 2 * $0]) | UInt16(bytes[body + 2 * $0 + 1]) << 8) }
                return BenchFile(path: path, name: name, samples: samples, reference: reference)
            }
            offset = body + size + (size & 1)
        }
        throw BenchError("\(path): no data")
    }

    static func write(_ samples: [Int16], to path: String) throws {
        var data = Data()
        func put32(_ value: Int) { withUnsafeBytes(of: UInt32(value).littleEndian) { data.append(contentsOf: $0) } }
        func put16(_ value: Int) { withUnsafeBytes(of: UInt16(value).littleEndian) { data.append(contentsOf: $0) } }
        data.append(contentsOf: Array("RIFF".utf8)); put32(36 + 2 * samples.count)
        data.append(contentsOf: Array("WAVEfmt ".utf8)); put32(16); put16(1); put16(1); put32(16000); put32(32000); put16(2); put16(16)
        data.append(contentsOf: Array("data".utf8)); put32(2 * samples.count)
        for sample in samples { put16(Int(UInt16(bitPattern: sample))) }
        try data.write(to: URL(fileURLWithPath: path))
    }
}

/// Headerless 16-bit little-endian mono 16 kHz PCM (pocketsphinx-testdata's `.raw` files).
enum BenchRaw {
    static func load(_ path: String, name: String, reference: String?) throws -> BenchFile {
        let bytes = [UInt8](try Data(contentsOf: URL(fileURLWithPath: path)))
        let samples = (0..<bytes.count / 2).map { Int16(bitPattern: UInt16(bytes[2 * $0]) | UInt16(bytes[2 * $0 + 1]) << 8) }
        return BenchFile(path: path, name: name, samples: samples, reference: reference)
    }
}

struct BenchError: Error, CustomStringConvertible {
    let description: String
    init(_ description: String) { self.description = description }
}

// MARK: - Measuring

func threadCPU() -> Double {
    var spec = timespec()
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &spec)
    return Double(spec.tv_sec) + Double(spec.tv_nsec) / 1e9
}

func monotonic() -> Double {
    var spec = timespec()
    clock_gettime(CLOCK_MONOTONIC, &spec)
    return Double(spec.tv_sec) + Double(spec.tv_nsec) / 1e9
}

/// This process's resident set size, from /proc/self/statm.
func residentBytes() -> Int {
    guard let text = try? String(contentsOfFile: "/proc/self/statm", encoding: .utf8) else { return 0 }
    let fields = text.split(separator: " ")
    guard fields.count > 1, let pages = Int(fields[1]) else { return 0 }
    return pages * Int(sysconf(Int32(_SC_PAGESIZE)))
}

// MARK: - Printing

/// Where a long part has got, on standard error (the tables on standard output stay as they are).
func progress(_ line: String) {
    FileHandle.standardError.write(Data((line + "\n").utf8))
}

func table(_ header: [String], _ rows: [[String]]) {
    let all = [header] + rows
    let widths = header.indices.map { column in all.map { $0.indices.contains(column) ? $0[column].count : 0 }.max() ?? 0 }
    printHeader(header, widths)
    for row in rows { print(tableLine(row, widths)) }
}

/// A table printed a row at a time, for one that takes minutes: the first column is as wide
/// as the longest of `firstColumn` (the rows' names, known before), the others as their
/// header (numbers fit; a longer cell pushes its row's later cells right).
struct RowPrinter {
    let widths: [Int]

    init(_ header: [String], firstColumn: [String]) {
        widths = [max(header[0].count, firstColumn.map(\.count).max() ?? 0)] + header.dropFirst().map { max($0.count, 5) }
        printHeader(header, widths)
    }

    func print(_ cells: [String]) { Swift.print(tableLine(cells, widths)) }
}

func printHeader(_ header: [String], _ widths: [Int]) {
    print(tableLine(header, widths))
    print(widths.map { String(repeating: "-", count: $0) }.joined(separator: "  "))
}

/// The first column left-aligned, the others right-aligned.
func tableLine(_ cells: [String], _ widths: [Int]) -> String {
    cells.enumerated().map { index, cell in
        let pad = String(repeating: " ", count: max(0, (index < widths.count ? widths[index] : 0) - cell.count))
        return index == 0 ? cell + pad : pad + cell
    }.joined(separator: "  ")
}

func f(_ value: Double, _ decimals: Int) -> String { String(format: "%.\(decimals)f", value) }
func pct(_ part: Int, _ whole: Int) -> String { whole == 0 ? "-" : String(format: "%.1f %%", 100 * Double(part) / Double(whole)) }
func mb(_ bytes: Int) -> Int { bytes / 1_048_576 }
func mean(_ values: [Double]) -> Double { values.isEmpty ? 0 : values.reduce(0, +) / Double(values.count) }
func ms(_ seconds: Double) -> String { String(format: "%.0f ms", seconds * 1000) }
/// The value below which a fraction `p` of the sorted `values` lie (nearest rank).
/// The chance that a right word's confidence is above a wrong word's (ties count half): the
/// area under the ROC curve of confidence as a right/wrong classifier.
func areaUnderCurve(right: [Double], wrong: [Double]) -> Double {
    guard !right.isEmpty, !wrong.isEmpty else { return .nan }
    var wins = 0.0
    for r in right {
        for w in wrong { wins += r > w ? 1 : (r == w ? 0.5 : 0) }
    }
    return wins / Double(right.count * wrong.count)
}
func median(_ values: [Double]) -> Double {
    let sorted = values.sorted()
    return sorted.isEmpty ? 0 : sorted[sorted.count / 2]
}
