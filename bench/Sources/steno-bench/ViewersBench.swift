import Foundation
import StenoAudio
import StenoCore
import StenoSystem
import StenoTestSupport

#if canImport(Glibc)
import Glibc
#endif

// `steno-bench viewers`: N WebSocket viewers following one channel on loopback while a
// publisher speaks in real time, against a real `steno serve --engine E` (`--engine`, default
// whisper as the server's); then the HLS request rate.

func runViewersBench(_ arguments: [String]) {
    var counts = [100, 1000, 5000]
    var steno = ".build/release/steno"
    var hlsSeconds = 5.0
    // The publisher's engine: Whisper (the server's default) sends a volatile every second or so
    // of speech, pocketsphinx about five a second, and viewers cost per event.
    var engine = "whisper"
    var index = 0
    while index < arguments.count {
        switch arguments[index] {
        case "--viewers":
            index += 1
            counts = arguments[safe: index]?.split(separator: ",").compactMap { Int($0) } ?? counts
        case "--steno":
            index += 1
            steno = arguments[safe: index] ?? steno
        case "--hls-seconds":
            index += 1
            hlsSeconds = arguments[safe: index].flatMap { Double($0) } ?? hlsSeconds
        case "--engine":
            index += 1
            engine = arguments[safe: index] ?? engine
        default:
            break
        }
        index += 1
    }
    guard FileManager.default.isExecutableFile(atPath: steno) else {
        print("viewers benchmark: no steno binary at \(steno) (swift build -c release --product steno)")
        return
    }
    // Sockets: the viewers' here and the server's there (the child inherits the limit).
    var limit = rlimit()
    getrlimit(Int32(RLIMIT_NOFILE.rawValue), &limit)
    limit.rlim_cur = limit.rlim_max
    setrlimit(Int32(RLIMIT_NOFILE.rawValue), &limit)
    let most = counts.max() ?? 0
    if Int(limit.rlim_cur) < most + 200 {
        print("viewers benchmark: the open-file limit (\(limit.rlim_cur)) is too low for \(most) viewers")
        return
    }

    let folder = "Tests/StenoSpeechTests/Resources/librivox"
    let files = ((try? FileManager.default.contentsOfDirectory(atPath: folder)) ?? []).filter { $0.hasSuffix(".wav") }.sorted()
    var samples: [Float] = []
    for file in files {
        guard let wav = try? WAVFile(path: "\(folder)/\(file)") else { continue }
        samples += wav.mono
    }
    guard !samples.isEmpty else { print("viewers benchmark: no audio in \(folder)"); return }
    let pcm = WAVFile(sampleRate: 16000, channels: 1, samples: samples).s16leBytes
    let duration = Double(samples.count) / 16000

    print("viewers benchmark: one publisher streams \(format(duration, 1)) s of speech in real time (20 ms messages) to")
    print("  channel \"bench\"; N WebSocket viewers on 127.0.0.1 follow it from this process (one poll thread).")
    print("  steno: \(steno) --engine \(engine), \(ProcessInfo.processInfo.activeProcessorCount) cores, --keepalive 0")
    print("")
    var rows: [(Int, ViewersRow)] = []
    for n in [0] + counts {
        guard let row = measureViewers(steno: steno, engine: engine, viewers: n, pcm: pcm, hlsSeconds: n == counts.last ? hlsSeconds : 0) else {
            print("  \(n) viewers: failed")
            continue
        }
        rows.append((n, row))
    }
    guard let baseline = rows.first(where: { $0.0 == 0 })?.1 else { return }
    print("  viewers   events delivered   server CPU s   CPU µs/event   RSS MB   KB/viewer   last viewer delay p50 / max   all finals")
    for (n, row) in rows {
        let extraCPU = max(0, row.cpuSeconds - baseline.cpuSeconds)
        let perEvent = row.eventsDelivered > 0 ? extraCPU / Double(row.eventsDelivered) * 1e6 : 0
        let perViewer = n > 0 ? (row.rssWithViewersMB - row.rssBeforeViewersMB) * 1024 / Double(n) : 0
        let delays = row.lastViewerDelays.sorted()
        let p50 = delays.isEmpty ? 0 : delays[delays.count / 2]
        let all = n == 0 ? "—" : "\(row.viewersWithEveryFinal)/\(n) (\(row.finals) finals)"
        print("  " + [pad("\(n)", 7), pad("\(row.eventsDelivered)", 18), pad(format(row.cpuSeconds, 2), 14),
                      pad(n == 0 ? "—" : format(perEvent, 1), 14), pad(format(row.rssWithViewersMB, 0), 8),
                      pad(n == 0 ? "—" : format(perViewer, 1), 11),
                      pad(n == 0 ? "—" : format(p50 * 1000, 0) + " / " + format((delays.last ?? 0) * 1000, 0) + " ms", 29),
                      all].joined(separator: " "))
    }
    if let hls = rows.last?.1.hls {
        print("")
        print("  HLS, after the broadcast, \(hls.connections) keep-alive clients for \(format(hlsSeconds, 0)) s: "
            + "\(format(hls.requestsPerSecond, 0)) requests/s (playlist and segments alternately), "
            + "server CPU \(format(hls.cpuPerRequest * 1e6, 0)) µs/request → \(format(1 / max(hls.cpuPerRequest, 1e-9), 0)) requests per CPU-second")
    }
    print("")
    print("  CPU: the server's user+system time from the publisher's start to the last viewer's last final,")
    print("  µs/event over the run with no viewers (the publisher's recognition). Delay: per final, the last")
    print("  viewer's arrival minus the publisher's own (all clocks in this process). RSS per viewer: after")
    print("  the viewers connected minus before.")
}

struct ViewersRow {
    var cpuSeconds = 0.0
    var eventsDelivered = 0
    var rssBeforeViewersMB = 0.0
    var rssWithViewersMB = 0.0
    var lastViewerDelays: [Double] = []
    var finals = 0
    var viewersWithEveryFinal = 0
    var hls: HLSRate?
}

struct HLSRate {
    var connections: Int
    var requestsPerSecond: Double
    var cpuPerRequest: Double
}

private func measureViewers(steno: String, engine: String, viewers n: Int, pcm: [UInt8], hlsSeconds: Double) -> ViewersRow? {
    guard let server = Child.spawn(steno, ["serve", "--engine", engine, "--port", "0", "--idle-timeout", "0", "--keepalive", "0",
                                           "--log-level", "warning", "--web-root", "/nonexistent"], stdout: true),
          let port = server.readPort() else { return nil }
    // Killed: a drain would only add its timeout to the bench.
    defer { server.terminate(SIGKILL) }
    // The shared decoders are made in the background at start: not during the measured round.
    guard waitForRecognizers(port: port) != nil else { return nil }
    // Warm-up: the recognizer is made and pooled.
    _ = publish(port: port, pcm: Array(pcm.prefix(32000 * 2)), channel: "warmup", realTime: false)

    var row = ViewersRow()
    row.rssBeforeViewersMB = server.residentMB()
    let crowd = Crowd()
    for _ in 0..<n {
        guard crowd.connect(port: port, path: "/v1/listen?channel=bench") else {
            print("  a viewer could not connect (\(crowd.count) connected)")
            return nil
        }
    }
    guard crowd.awaitUpgrades(timeout: 120) else { print("  upgrades did not complete"); return nil }
    usleep(500_000)
    row.rssWithViewersMB = server.residentMB()

    let reader = Thread { crowd.readLoop() }
    reader.start()
    let cpuBefore = server.cpuSeconds()
    guard let published = publish(port: port, pcm: pcm, channel: "bench", realTime: true) else { return nil }
    // Every viewer's last final, or give up after 60 s.
    let deadline = monotonicSeconds() + 60
    while monotonicSeconds() < deadline && crowd.finalsComplete(published.finals.count) < n { usleep(10_000) }
    let cpuAfter = server.cpuSeconds()
    crowd.stop()
    while !reader.isFinished { usleep(10_000) }

    row.cpuSeconds = cpuAfter - cpuBefore
    row.finals = published.finals.count
    row.eventsDelivered = crowd.eventsReceived
    row.viewersWithEveryFinal = crowd.finalsComplete(published.finals.count)
    for (key, at) in published.finals {
        if let last = crowd.lastArrival[key] { row.lastViewerDelays.append(max(0, last - at)) }
    }
    if hlsSeconds > 0 { row.hls = hammerHLS(port: port, seconds: hlsSeconds, server: server) }
    crowd.closeAll()
    return row
}

// MARK: - The publisher

struct Published {
    /// Each final's `start` text (its key) and when the publisher received it.
    var finals: [(String, Double)] = []
}

func publish(port: Int, pcm: [UInt8], channel: String, realTime: Bool) -> Published? {
    do {
        let ws = try WebSocketTestClient.connect(port: port, timeout: 30)
        var result = Published()
        _ = try streamSession(
            ws, start: #"{"type":"start","audio":{"encoding":"pcm_s16le","sampleRate":16000,"channels":1},"channel":"\#(channel)"}"#,
            frames: pcmFrames(pcm), realTime: realTime
        ) { type, _, text, at in
            // The key as the viewers see it: the final's text as sent, not a number re-printed.
            if type == "final", let key = finalKey(Array(text.utf8)[...]) { result.finals.append((key, at)) }
        }
        return result
    } catch {
        print("  the publisher failed: \(error)")
        return nil
    }
}

/// The `"start":…` value of a final's JSON, as text: the key that names the final.
func finalKey(_ bytes: ArraySlice<UInt8>) -> String? {
    let needle = Array(#","start":"#.utf8)
    var i = bytes.startIndex
    while i + needle.count <= bytes.endIndex {
        if bytes[i..<(i + needle.count)].elementsEqual(needle) {
            var j = i + needle.count
            while j < bytes.endIndex && bytes[j] != UInt8(ascii: ",") { j += 1 }
            return String(decoding: bytes[(i + needle.count)..<j], as: UTF8.self)
        }
        i += 1
    }
    return nil
}

// MARK: - The viewers

/// Many WebSocket viewers on non-blocking sockets, read by one poll loop (Glibc's module has
/// no epoll).
final class Crowd: @unchecked Sendable {
    private struct Viewer {
        var fd: Int32
        var upgraded = false
        var buffer: [UInt8] = []
        var finals = 0
    }

    private var viewers: [Int32: Viewer] = [:]
    private var pollfds: [pollfd] = []
    private let lock = NSLock()
    private var running = true
    private(set) var eventsReceived = 0
    /// Per final key: the latest arrival at any viewer.
    private(set) var lastArrival: [String: Double] = [:]

    var count: Int { viewers.count }

    func connect(port: Int, path: String) -> Bool {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        guard fd >= 0 else { return false }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = in_port_t(UInt16(port).bigEndian)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        let connected = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { Glibc.connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
        }
        guard connected == 0 else { close(fd); return false }
        let request = "GET \(path) HTTP/1.1\r\nHost: 127.0.0.1:\(port)\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
            + "Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n\r\n"
        let bytes = Array(request.utf8)
        guard bytes.withUnsafeBytes({ write(fd, $0.baseAddress, $0.count) }) == bytes.count else { close(fd); return false }
        _ = fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK)
        pollfds.append(pollfd(fd: fd, events: Int16(POLLIN), revents: 0))
        viewers[fd] = Viewer(fd: fd)
        return true
    }

    /// Reads handshake answers (and the `joined` after them) until every viewer is upgraded.
    func awaitUpgrades(timeout: Double) -> Bool {
        let deadline = monotonicSeconds() + timeout
        while viewers.values.contains(where: { !$0.upgraded }) && monotonicSeconds() < deadline { poll(milliseconds: 50) }
        return !viewers.values.contains { !$0.upgraded }
    }

    func readLoop() {
        while lock.withLock({ running }) { poll(milliseconds: 20) }
    }

    func stop() { lock.withLock { running = false } }

    func finalsComplete(_ count: Int) -> Int { lock.withLock { viewers.values.filter { $0.finals >= count }.count } }

    func closeAll() {
        for fd in viewers.keys { close(fd) }
        viewers.removeAll()
        pollfds.removeAll()
    }

    private func poll(milliseconds: Int32) {
        let n = Glibc.poll(&pollfds, nfds_t(pollfds.count), milliseconds)
        guard n > 0 else { return }
        let now = monotonicSeconds()
        var chunk = [UInt8](repeating: 0, count: 65536)
        lock.lock()
        defer { lock.unlock() }
        for i in pollfds.indices where pollfds[i].revents != 0 {
            let fd = pollfds[i].fd
            pollfds[i].revents = 0
            while true {
                let got = chunk.withUnsafeMutableBytes { read(fd, $0.baseAddress, $0.count) }
                if got <= 0 { break }
                viewers[fd]?.buffer += chunk[0..<got]
            }
            guard var viewer = viewers[fd] else { continue }
            if !viewer.upgraded {
                guard let end = viewer.buffer.firstRange(of: [13, 10, 13, 10]) else { viewers[fd] = viewer; continue }
                viewer.upgraded = true
                viewer.buffer.removeSubrange(0..<end.upperBound)
            }
            // Frames from the server: unmasked; text frames are events.
            var offset = 0
            let b = viewer.buffer
            while b.count - offset >= 2 {
                let opcode = b[offset] & 0x0F
                var length = Int(b[offset + 1] & 0x7F)
                var header = 2
                if length == 126 {
                    guard b.count - offset >= 4 else { break }
                    length = Int(b[offset + 2]) << 8 | Int(b[offset + 3])
                    header = 4
                } else if length == 127 {
                    guard b.count - offset >= 10 else { break }
                    length = (0..<8).reduce(0) { $0 << 8 | Int(b[offset + 2 + $1]) }
                    header = 10
                }
                guard b.count - offset >= header + length else { break }
                if opcode == 1 {
                    let payload = b[(offset + header)..<(offset + header + length)]
                    eventsReceived += 1
                    if payload.starts(with: #"{"type":"final""#.utf8), let key = finalKey(payload) {
                        viewer.finals += 1
                        lastArrival[key] = max(lastArrival[key] ?? 0, now)
                    }
                }
                offset += header + length
            }
            viewer.buffer.removeSubrange(0..<offset)
            viewers[fd] = viewer
        }
    }
}

// MARK: - HLS

/// `connections` keep-alive HTTP clients asking for the playlist and a segment in turn.
private func hammerHLS(port: Int, seconds: Double, server: Child) -> HLSRate? {
    guard let playlist = try? HTTPTestClient.get(port: port, "/v1/channels/bench/captions.m3u8").bodyText,
          let segment = playlist.split(separator: "\n").last(where: { $0.hasPrefix("captions/") }) else { return nil }
    let paths = ["/v1/channels/bench/captions.m3u8", "/v1/channels/bench/" + segment]
    let connections = 8
    let total = Locked(0)
    let cpuBefore = server.cpuSeconds()
    let start = monotonicSeconds()
    let threads = (0..<connections).map { _ in
        Thread {
            var done = 0
            var fd: Int32 = -1
            var turn = 0
            var buffer = [UInt8](repeating: 0, count: 65536)
            while monotonicSeconds() - start < seconds {
                if fd < 0 { fd = openHTTP(port: port) }
                guard fd >= 0 else { break }
                let request = "GET \(paths[turn % 2]) HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n"
                turn += 1
                let bytes = Array(request.utf8)
                guard bytes.withUnsafeBytes({ write(fd, $0.baseAddress, $0.count) }) == bytes.count,
                      readHTTPResponse(fd, &buffer) else {
                    close(fd)
                    fd = -1
                    continue
                }
                done += 1
            }
            if fd >= 0 { close(fd) }
            total.withLock { $0 += done }
        }
    }
    threads.forEach { $0.start() }
    while threads.contains(where: { !$0.isFinished }) { usleep(10_000) }
    let elapsed = monotonicSeconds() - start
    let cpu = server.cpuSeconds() - cpuBefore
    let requests = total.withLock { $0 }
    guard requests > 0 else { return nil }
    return HLSRate(connections: connections, requestsPerSecond: Double(requests) / elapsed, cpuPerRequest: cpu / Double(requests))
}

private func openHTTP(port: Int) -> Int32 {
    let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
    var address = sockaddr_in()
    address.sin_family = sa_family_t(AF_INET)
    address.sin_port = in_port_t(UInt16(port).bigEndian)
    address.sin_addr.s_addr = inet_addr("127.0.0.1")
    let connected = withUnsafePointer(to: &address) {
        $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { Glibc.connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
    }
    if connected != 0 { close(fd); return -1 }
    return fd
}

/// Reads one response (headers and a Content-Length body); false if the connection ended.
private func readHTTPResponse(_ fd: Int32, _ buffer: inout [UInt8]) -> Bool {
    var data: [UInt8] = []
    while true {
        let got = buffer.withUnsafeMutableBytes { read(fd, $0.baseAddress, $0.count) }
        guard got > 0 else { return false }
        data += buffer[0..<got]
        guard let end = data.firstRange(of: [13, 10, 13, 10]) else { continue }
        let head = String(decoding: data[..<end.lowerBound], as: UTF8.self).lowercased()
        let length = head.split(separator: "\r\n").first { $0.hasPrefix("content-length:") }
            .flatMap { Int($0.dropFirst(15).trimmingCharacters(in: .whitespaces)) } ?? 0
        while data.count < end.upperBound + length {
            let more = buffer.withUnsafeMutableBytes { read(fd, $0.baseAddress, $0.count) }
            guard more > 0 else { return false }
            data += buffer[0..<more]
        }
        return head.hasPrefix("http/1.1 200")
    }
}

