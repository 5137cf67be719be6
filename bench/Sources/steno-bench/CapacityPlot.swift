// steno-bench capacity: lag p95 against N, as SVG (CapacityBench.swift).
import Foundation

// MARK: - The plot

/// Lag p95 against N, one line per design, with the 1 s target and the compute bound; a
/// round where sessions were refused is drawn as a hollow point with the count.
func capacitySVG(rows: [CapacityRow], designs: [CapacityDesign], bound: Double?, cores: Int) -> String {
    let width = 640.0, height = 400.0
    let left = 60.0, right = 20.0, top = 40.0, bottom = 50.0
    let maxN = Double(max(rows.map(\.sessions).max() ?? 1, Int((bound ?? 0).rounded(.up)))) + 1
    let worst = rows.map(\.lagP95).max() ?? 1
    let maxLag = max(2, (worst * 1.1).rounded(.up))
    func x(_ n: Double) -> Double { left + n / maxN * (width - left - right) }
    func y(_ lag: Double) -> Double { height - bottom - min(lag, maxLag) / maxLag * (height - top - bottom) }
    let colours: [CapacityDesign: String] = [.shared: "#1f77b4", .dedicated: "#d62728"]
    var svg = """
    <svg xmlns="http://www.w3.org/2000/svg" width="\(Int(width))" height="\(Int(height))" viewBox="0 0 \(Int(width)) \(Int(height))" font-family="sans-serif" font-size="12">
    <rect width="100%" height="100%" fill="white"/>
    <text x="\(Int(width / 2))" y="20" text-anchor="middle" font-size="14">steno-bench capacity: lag p95 against concurrent sessions (\(cores) cores)</text>

    """
    // Axes, ticks and grid.
    svg += svgLine(x(0), y(0), x(maxN), y(0), "black") + svgLine(x(0), y(0), x(0), y(maxLag), "black")
    let nStep = maxN > 20 ? 4.0 : 2.0
    for n in stride(from: 0.0, through: maxN, by: nStep) {
        svg += svgLine(x(n), y(0), x(n), y(0) + 5, "black")
        svg += svgText(x(n), y(0) + 18, "\(Int(n))", anchor: "middle")
    }
    let lagStep = maxLag > 10 ? (maxLag / 5).rounded(.up) : 1
    for lag in stride(from: 0.0, through: maxLag, by: lagStep) {
        svg += svgLine(x(0) - 5, y(lag), x(0), y(lag), "black") + svgLine(x(0), y(lag), x(maxN), y(lag), "#eeeeee")
        svg += svgText(x(0) - 8, y(lag) + 4, "\(Int(lag)) s", anchor: "end")
    }
    svg += svgText(x(maxN / 2), height - 12, "sessions (about half speech each), started one by one", anchor: "middle")
    svg += "<text transform=\"translate(16 \(Int(y(maxLag / 2)))) rotate(-90)\" text-anchor=\"middle\">lag p95 (s)</text>\n"
    // The target and the bound.
    svg += svgLine(x(0), y(1), x(maxN), y(1), "#2ca02c", dash: true) + svgText(x(maxN) - 4, y(1) - 4, "1 s target", anchor: "end", colour: "#2ca02c")
    if let bound {
        svg += svgLine(x(bound), y(0), x(bound), y(maxLag), "#7f7f7f", dash: true)
        svg += svgText(x(bound) - 4, y(maxLag) + 12, "compute bound \(format(bound, 1))", anchor: "end", colour: "#7f7f7f")
    }
    // One line per design.
    for (i, design) in designs.enumerated() {
        let colour = colours[design] ?? "black"
        let mine = rows.filter { $0.design == design }.sorted { $0.sessions < $1.sessions }
        let points = mine.map { "\(format(x(Double($0.sessions)), 1)),\(format(y($0.lagP95), 1))" }.joined(separator: " ")
        svg += "<polyline fill=\"none\" stroke=\"\(colour)\" stroke-width=\"2\" points=\"\(points)\"/>\n"
        for row in mine {
            let fill = row.refused > 0 ? "white" : colour
            svg += "<circle cx=\"\(format(x(Double(row.sessions)), 1))\" cy=\"\(format(y(row.lagP95), 1))\" r=\"4\" fill=\"\(fill)\" stroke=\"\(colour)\" stroke-width=\"2\"/>\n"
            if row.refused > 0 {
                svg += svgText(x(Double(row.sessions)), y(row.lagP95) - 8, "\(row.refused) refused", anchor: "middle", colour: colour, size: 10)
            }
        }
        let legendY = top + 14 + Double(i) * 16
        svg += svgLine(x(0) + 12, legendY - 4, x(0) + 32, legendY - 4, colour, widthValue: 2)
        svg += svgText(x(0) + 38, legendY, design == .shared ? "shared recognizers (default)" : "a decoder per session (dedicated)", anchor: "start")
    }
    svg += svgText(x(0) + 12, top + 14 + Double(designs.count) * 16, "hollow: sessions refused at the handshake (503)", anchor: "start", colour: "#555555", size: 10)
    svg += "</svg>\n"
    return svg
}

func svgLine(_ x1: Double, _ y1: Double, _ x2: Double, _ y2: Double, _ colour: String, dash: Bool = false,
                  widthValue: Double = 1) -> String {
    "<line x1=\"\(format(x1, 1))\" y1=\"\(format(y1, 1))\" x2=\"\(format(x2, 1))\" y2=\"\(format(y2, 1))\" stroke=\"\(colour)\" stroke-width=\"\(format(widthValue, 0))\""
        + (dash ? " stroke-dasharray=\"6 4\"" : "") + "/>\n"
}

func svgText(_ x: Double, _ y: Double, _ content: String, anchor: String, colour: String = "black", size: Int = 12) -> String {
    let escaped = content.replacingOccurrences(of: "&", with: "&amp;").replacingOccurrences(of: "<", with: "&lt;")
    return "<text x=\"\(format(x, 1))\" y=\"\(format(y, 1))\" text-anchor=\"\(anchor)\" fill=\"\(colour)\" font-size=\"\(size)\">\(escaped)</text>\n"
}
