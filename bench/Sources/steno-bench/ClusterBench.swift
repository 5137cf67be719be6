import Foundation
import StenoAudio
import StenoCore
import StenoSystem
import StenoTestSupport

#if canImport(Glibc)
import Glibc
#endif

/// `steno-bench cluster`: N viewers on a second `steno serve --redis` that follows the channel
/// through a real redis-server, next to the same N on the publisher's own instance (one
/// process): the delay of the last viewer behind the publisher per final, and the viewers'
/// instance's CPU.
func runClusterBench(_ arguments: [String]) {
    var counts = [100, 1000]
    var steno = ".build/release/steno"
    var index = 0
    while index < arguments.count {
        switch arguments[index] {
        case "--viewers":
            index += 1
            counts = arguments[safe: index]?.split(separator: ",").compactMap { Int($0) } ?? counts
        case "--steno":
            index += 1
            steno = arguments[safe: index] ?? steno
        default:
            break
        }
        index += 1
    }
    guard FileManager.default.isExecutableFile(atPath: steno) else {
        print("cluster benchmark: no steno binary at \(steno) (swift build -c release --product steno)")
        return
    }
    guard TestRedisServer.isInstalled else { print("cluster benchmark: \(TestRedisServer.missing)"); return }
    var limit = rlimit()
    getrlimit(Int32(RLIMIT_NOFILE.rawValue), &limit)
    limit.rlim_cur = limit.rlim_max
    setrlimit(Int32(RLIMIT_NOFILE.rawValue), &limit)
    guard let (pcm, duration) = benchSpeech() else { print("cluster benchmark: no audio"); return }
    let redis: TestRedisServer
    do { redis = try TestRedisServer() } catch { print("cluster benchmark: redis-server: \(error)"); return }
    defer { redis.remove() }

    print("cluster benchmark: one publisher streams \(format(duration, 1)) s of speech in real time to one steno serve --redis;")
    print("  N viewers follow it on that instance (one process) or on a second one (through redis-server on 127.0.0.1).")
    print("  steno: \(steno), \(ProcessInfo.processInfo.activeProcessorCount) cores, --keepalive 0")
    print("")
    print("  viewers   on                        events delivered   viewers' instance CPU s   last viewer delay p50 / max   all finals")
    for n in counts {
        for across in [false, true] {
            guard let row = measureCluster(steno: steno, viewers: n, pcm: pcm, redis: redis.url, across: across,
                                           channel: "bench-\(n)-\(across ? "b" : "a")") else {
                print("  \(n) viewers: failed")
                continue
            }
            let delays = row.lastViewerDelays.sorted()
            let p50 = delays.isEmpty ? 0 : delays[delays.count / 2]
            print("  " + [pad("\(n)", 7), pad(across ? "another instance (Redis)" : "the publisher's instance", 25),
                          pad("\(row.eventsDelivered)", 18), pad(format(row.cpuSeconds, 2), 25),
                          pad(format(p50 * 1000, 0) + " / " + format((delays.last ?? 0) * 1000, 0) + " ms", 29),
                          "\(row.viewersWithEveryFinal)/\(n) (\(row.finals) finals)"].joined(separator: " "))
        }
    }
    print("")
    print("  CPU: the viewers' instance's user+system time from the publisher's start to the last viewer's last final")
    print("  (on the publisher's instance that includes the recognition). Delay: per final, the last viewer's")
    print("  arrival minus the publisher's own (all clocks in this process).")
}

/// The five LibriVox sentences as 16 kHz s16le, and their length.
private func benchSpeech() -> ([UInt8], Double)? {
    let folder = "Tests/StenoSpeechTests/Resources/librivox"
    let files = ((try? FileManager.default.contentsOfDirectory(atPath: folder)) ?? []).filter { $0.hasSuffix(".wav") }.sorted()
    var samples: [Float] = []
    for file in files {
        guard let wav = try? WAVFile(path: "\(folder)/\(file)") else { continue }
        samples += wav.mono
    }
    guard !samples.isEmpty else { return nil }
    return (WAVFile(sampleRate: 16000, channels: 1, samples: samples).s16leBytes, Double(samples.count) / 16000)
}

private func measureCluster(steno: String, viewers n: Int, pcm: [UInt8], redis: String, across: Bool, channel: String) -> ViewersRow? {
    let arguments = ["serve", "--engine", "pocketsphinx", "--port", "0", "--idle-timeout", "0", "--keepalive", "0", "--log-level", "warning",
                     "--web-root", "/nonexistent", "--redis", redis]
    guard let publisherInstance = Child.spawn(steno, arguments, stdout: true), let port = publisherInstance.readPort() else { return nil }
    defer { publisherInstance.terminate(SIGKILL) }
    var other: Child?
    var viewersPort = port
    if across {
        guard let child = Child.spawn(steno, arguments, stdout: true), let otherPort = child.readPort() else { return nil }
        other = child
        viewersPort = otherPort
    }
    defer { other?.terminate(SIGKILL) }
    let viewersInstance = other ?? publisherInstance
    _ = publish(port: port, pcm: Array(pcm.prefix(32000 * 2)), channel: "warmup", realTime: false)

    var row = ViewersRow()
    let crowd = Crowd()
    for _ in 0..<n {
        guard crowd.connect(port: viewersPort, path: "/v1/listen?channel=\(channel)") else { return nil }
    }
    guard crowd.awaitUpgrades(timeout: 120) else { return nil }
    // The other instance follows the channel's stream within its blocking read's half second.
    usleep(1_000_000)
    let reader = Thread { crowd.readLoop() }
    reader.start()
    let cpuBefore = viewersInstance.cpuSeconds()
    guard let published = publish(port: port, pcm: pcm, channel: channel, realTime: true) else { return nil }
    let deadline = monotonicSeconds() + 60
    while monotonicSeconds() < deadline && crowd.finalsComplete(published.finals.count) < n { usleep(10_000) }
    let cpuAfter = viewersInstance.cpuSeconds()
    crowd.stop()
    while !reader.isFinished { usleep(10_000) }
    row.cpuSeconds = cpuAfter - cpuBefore
    row.finals = published.finals.count
    row.eventsDelivered = crowd.eventsReceived
    row.viewersWithEveryFinal = crowd.finalsComplete(published.finals.count)
    for (key, at) in published.finals {
        if let last = crowd.lastArrival[key] { row.lastViewerDelays.append(max(0, last - at)) }
    }
    crowd.closeAll()
    return row
}
