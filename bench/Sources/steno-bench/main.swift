// steno-bench: prints benchmark tables. Run through `make bench` (release build).
// Usage: steno-bench [audio|speech|server|all] [options]

import CStenoShims

// Tables appear line by line even when the output goes to a pipe or a file.
steno_line_buffer_stdout()

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
