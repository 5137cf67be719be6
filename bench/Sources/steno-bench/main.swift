// steno-bench: prints benchmark tables. Run through `make bench` (release build).
// Usage: steno-bench [audio|speech|server|capacity|viewers|cluster|phrases|connections|latency|all] [options]
//        steno-bench opus IN.wav OUT.wav   (what the server hears of a WAV sent as Opus)
// (and dedicated-server, echo-server: servers the benchmarks and scripts/conformance.sh run, BenchServers.swift)

// `stdout` is a C global that strict concurrency will not read; @preconcurrency lets the one
// call below through.
@preconcurrency import Glibc

// Tables appear line by line even when the output goes to a pipe or a file.
setvbuf(stdout, nil, _IOLBF, 0)

let arguments = Array(CommandLine.arguments.dropFirst())
let which = arguments.first ?? "all"
let rest = Array(arguments.dropFirst())

switch which {
case "audio": runAudioBench(rest)
case "speech": runSpeechBench(rest)
case "server": runServerBench(rest)
case "capacity": runCapacityBench(rest)
case "viewers": runViewersBench(rest)
case "cluster": runClusterBench(rest)
case "phrases": runPhraseBench(rest)
case "connections": runConnectionsBench(rest)
case "latency": runLatencyBench(rest)
case "opus": runOpusRoundTrip(rest)
case "dedicated-server": runDedicatedServer(rest)
case "echo-server": runEchoServer(rest)
case "all":
    runAudioBench(rest)
    runSpeechBench(rest)
    runServerBench(rest)
    runCapacityBench(rest)
    runViewersBench(rest)
    runClusterBench(rest)
    runPhraseBench(rest)
    runConnectionsBench(rest)
    runLatencyBench(rest)
default:
    print("usage: steno-bench [audio|speech|server|capacity|viewers|cluster|phrases|connections|latency|all]")
}
