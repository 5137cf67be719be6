// steno-bench: prints benchmark tables. Run through `make bench` (release build).
// Usage: steno-bench [audio|speech|server|all] [options]

let arguments = Array(CommandLine.arguments.dropFirst())
let which = arguments.first ?? "all"
let rest = Array(arguments.dropFirst())

switch which {
case "audio": runAudioBench(rest)
case "speech": runSpeechBench(rest)
case "server": runServerBench(rest)
case "all":
    runAudioBench(rest)
    runSpeechBench(rest)
    runServerBench(rest)
default:
    print("usage: steno-bench [audio|speech|server|all]")
}
