// steno: the live-captioning server and its tools.
//   steno serve [options]          the WebSocket server (see `steno serve --help`)
//   steno transcribe FILE [...]    a WAV file through the same session pipeline
//   steno send [INPUT] [...]       audio to a server, captions back
//   steno listen --channel NAME    a broadcast channel's captions
//   steno models                   the models a server has, and their languages

#if canImport(Glibc)
import Glibc
#endif

let arguments = Array(CommandLine.arguments.dropFirst())
let usage = """
    usage: steno <command> [options]

    commands:
      serve                 run the captioning server (steno serve --help)
      transcribe FILE       transcribe a WAV file (steno transcribe --help)
      send [INPUT]          stream a file, standard input or a microphone to a server (steno send --help)
      listen --channel NAME print a broadcast channel's captions (steno listen --help)
      models                print the models a server has and the languages they recognize
      version               print the version

    """

switch arguments.first {
case "serve":
    exit(Serve.run(Array(arguments.dropFirst())))
case "transcribe":
    exit(Transcribe.run(Array(arguments.dropFirst())))
case "send":
    exit(Send.run(Array(arguments.dropFirst())))
case "listen":
    exit(Listen.run(Array(arguments.dropFirst())))
case "models":
    exit(Models.run(Array(arguments.dropFirst())))
case "version", "--version":
    print("steno \(StenoVersion.string)")
case "help", "--help", "-h":
    print(usage, terminator: "")
case nil:
    StandardStreams.stderr(usage)
    exit(2)
case let other?:
    StandardStreams.stderr("steno: unknown command '\(other)'\n\n" + usage)
    exit(2)
}
