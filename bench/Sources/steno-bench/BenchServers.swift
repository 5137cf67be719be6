import Foundation
import StenoServer
import StenoSpeech
import StenoSystem

#if canImport(Glibc)
import Glibc
#endif

// Servers in modes that `steno serve` does not ship, built with StenoServer's API for the
// benchmarks and the conformance script to run as child processes. Each prints `… listening
// on http://127.0.0.1:PORT` as `steno serve` does, and runs until it is killed.
//
//   steno-bench dedicated-server --recognizers N [--max-sessions N] [--lag-target S]
//                                [--admit-utilization F] [--endpointing MODE] [--spare-recognizers N]
//
// pocketsphinx with a decoder per session, kept from its first utterance to its end
// (`ServerOptions.dedicatedRecognizers`): the design before decoders were shared, which
// `server` and `capacity` compare with (`--designs dedicated`). Otherwise it is
// `steno serve --engine pocketsphinx --port 0 --idle-timeout 0 --log-level warning` with no
// web root, and its options are `steno serve`'s.
//
//   steno-bench echo-server
//
// A WebSocket route `/echo` that echoes every message on the real transport, with no session,
// token or admission (`ServerOptions.echoPath`), for Autobahn|Testsuite (scripts/conformance.sh):
// room for 16 MB messages (section 9) and queues that hold them, and nothing that would close a
// connection Autobahn keeps quiet on purpose. No session ever uses its one decoder.

/// The path `steno-bench` runs itself by, to start one of these servers.
let benchExecutable = "/proc/self/exe"

func runDedicatedServer(_ arguments: [String]) {
    var options = ServerOptions()
    options.port = 0
    options.limits.idleTimeoutSeconds = 0
    options.logLevel = .warning
    options.endpointing = .standard  // steno serve's default (EndpointingFlag.serverDefault)
    options.dedicatedRecognizers = true
    var index = 0
    while index < arguments.count {
        let name = arguments[index]
        let value = arguments[safe: index + 1] ?? ""
        func number(_ value: String) -> Double {
            guard let number = Double(value), number.isFinite, number >= 0 else { benchServerUsage("\(name) \(value)") }
            return number
        }
        switch name {
        case "--recognizers": options.recognizers = max(1, Int(number(value)))
        case "--max-sessions": options.maxSessions = max(1, Int(number(value)))
        case "--spare-recognizers": options.spareRecognizers = Int(number(value))
        case "--lag-target": options.lagTarget = number(value)
        case "--admit-utilization": options.admitUtilization = min(1, number(value))
        case "--endpointing":
            guard let endpointing = Endpointing(commandLine: value) else { benchServerUsage("\(name) \(value)") }
            options.endpointing = endpointing
        default: benchServerUsage(name)
        }
        index += 2
    }
    var configuration = PocketSphinxConfiguration(recognizers: options.recognizers)
    if let endpointing = options.endpointing { configuration.endpointing = endpointing }
    serveUntilKilled("dedicated-server", options, configuration)
}

func runEchoServer(_ arguments: [String]) {
    if let first = arguments.first { benchServerUsage(first) }
    var options = ServerOptions()
    options.port = 0
    options.echoPath = "/echo"
    options.limits.maxFrameBytes = 16 << 20
    options.limits.outboundBytes = 64 << 20
    options.limits.idleTimeoutSeconds = 0
    options.limits.startTimeoutSeconds = 0
    options.writeStall = nil
    options.keepAlive = nil
    options.recognizers = 1
    options.logLevel = .warning
    serveUntilKilled("echo-server", options, PocketSphinxConfiguration(recognizers: options.recognizers))
}

private func serveUntilKilled(_ name: String, _ options: ServerOptions, _ configuration: PocketSphinxConfiguration) {
    do {
        let engine = try PocketSphinxEngine(configuration: configuration)
        let server = StenoServer(options: options, engine: engine, log: Log(minimum: options.logLevel))
        let port = try server.start()
        print("steno-bench \(name) listening on http://\(options.host):\(port)")
        withExtendedLifetime(server) {
            while true { sleep(3600) }
        }
    } catch {
        FileHandle.standardError.write(Data("steno-bench \(name): \(error)\n".utf8))
        exit(1)
    }
}

private func benchServerUsage(_ problem: String) -> Never {
    FileHandle.standardError.write(Data("steno-bench: \(problem)? see bench/Sources/steno-bench/BenchServers.swift\n".utf8))
    exit(2)
}
