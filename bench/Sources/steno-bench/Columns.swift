import Foundation

// The benchmarks' tables: numbers and columns, one definition for every bench.

/// `value` with `decimals` digits after the point.
func format(_ value: Double, _ decimals: Int) -> String { String(format: "%.\(decimals)f", value) }

/// `text` left-aligned in `width` columns.
func pad(_ text: String, _ width: Int) -> String {
    text.count >= width ? text : text + String(repeating: " ", count: width - text.count)
}

/// `text` right-aligned in `width` columns.
func rightAligned(_ text: String, _ width: Int) -> String {
    text.count >= width ? text : String(repeating: " ", count: width - text.count) + text
}
