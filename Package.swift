// swift-tools-version:6.0
import PackageDescription

// C libraries come from Debian packages (installed by scripts/bootstrap.sh);
// nothing is fetched from outside. Data flows one way through the modules:
//   StenoTransport (socket bytes) → StenoServer (routes, sessions) → StenoSession
//   (decode → resample → recognize) → events → StenoTransport (outbound queues).
let package = Package(
    name: "Steno",
    platforms: [.macOS(.v15)],
    products: [
        .executable(name: "steno", targets: ["steno"]),
        .library(name: "StenoCore", targets: ["StenoCore"]),
        .library(name: "StenoAudio", targets: ["StenoAudio"]),
        .library(name: "StenoSpeech", targets: ["StenoSpeech"]),
        .library(name: "StenoSession", targets: ["StenoSession"]),
        .library(name: "StenoTransport", targets: ["StenoTransport"]),
        .library(name: "StenoServer", targets: ["StenoServer"]),
    ],
    targets: [
        // System libraries, found with pkg-config.
        .systemLibrary(
            name: "CLibWebSockets", pkgConfig: "libwebsockets",
            providers: [.apt(["libwebsockets-dev"])]),
        .systemLibrary(
            name: "COpus", pkgConfig: "opus",
            providers: [.apt(["libopus-dev"])]),
        .systemLibrary(
            name: "CSoxr", pkgConfig: "soxr",
            providers: [.apt(["libsoxr-dev"])]),
        .systemLibrary(
            name: "CPocketSphinx", pkgConfig: "pocketsphinx",
            providers: [.apt(["libpocketsphinx-dev", "libsphinxbase-dev", "pocketsphinx-en-us"])]),
        .systemLibrary(
            name: "CAlsa", pkgConfig: "alsa",
            providers: [.apt(["libasound2-dev"])]),
        // hiredis.pc's -D_FILE_OFFSET_BITS=64 is dropped by SwiftPM with a warning (64-bit
        // already; harmless).
        .systemLibrary(
            name: "CHiredis", pkgConfig: "hiredis",
            providers: [.apt(["libhiredis-dev"])]),
        .systemLibrary(
            name: "CCrypto", pkgConfig: "libcrypto",
            providers: [.apt(["libssl-dev"])]),
        .systemLibrary(
            name: "CCurl", pkgConfig: "libcurl",
            providers: [.apt(["libcurl4-openssl-dev"])]),
        .systemLibrary(
            name: "CAVFormat", pkgConfig: "libavformat",
            providers: [.apt(["libavformat-dev", "libavcodec-dev", "libswresample-dev", "libavutil-dev"])]),

        // One shim per C library: what Swift cannot call (variadic functions, macros).
        .target(name: "CLwsShims", dependencies: ["CLibWebSockets"]),
        .target(name: "COpusShims", dependencies: ["COpus"]),
        .target(name: "CPocketSphinxShims", dependencies: ["CPocketSphinx"]),
        .target(name: "CAlsaShims", dependencies: ["CAlsa"]),
        .target(name: "CCurlShims", dependencies: ["CCurl"]),
        .target(name: "CAVShims", dependencies: ["CAVFormat"],
                linkerSettings: [.linkedLibrary("avformat"), .linkedLibrary("avcodec"), .linkedLibrary("swresample"),
                                 .linkedLibrary("avutil")]),
        // libuv, for the event loop libwebsockets runs on (its Debian plugin, a foreign loop).
        .target(name: "CLibUVShims", linkerSettings: [.linkedLibrary("uv")]),

        // Generic rooms, nothing Steno-specific: a lock, the worker pool, a metrics registry.
        .target(name: "StenoSystem", dependencies: ["StenoCore"]),
        .target(name: "StenoWorkers", dependencies: ["StenoSystem"]),
        .target(name: "StenoPrometheus", dependencies: ["StenoSystem"]),

        // Pure Swift: wire messages, the session state machine, transcripts, captions, flow control.
        .target(name: "StenoCore"),
        // PCM conversion, Opus decoding, resampling, the audio clock, WAV files.
        .target(
            name: "StenoAudio",
            dependencies: ["StenoCore", "COpus", "COpusShims", "CSoxr", "CAVShims"]),
        // The recognizer room: the recognizer protocol, pocketsphinx, the speech detector.
        .target(
            name: "StenoSpeech",
            dependencies: ["StenoCore", "StenoSystem", "CPocketSphinx", "CPocketSphinxShims"]),
        // The session driver: one session's pipeline (decode → resample → recognize), used by
        // `steno transcribe` and by the server.
        .target(
            name: "StenoSession",
            dependencies: ["StenoCore", "StenoAudio", "StenoSpeech", "StenoSystem", "StenoWorkers"]),
        // The Whisper engine's worker process (scripts/whisper_worker.py), supervised: the
        // framing of the hand-off, restarts, requests re-sent.
        .target(
            name: "StenoWhisper",
            dependencies: ["StenoCore", "StenoSpeech", "StenoSystem"]),
        // The libwebsockets transport: the only module that touches a wsi.
        .target(
            name: "StenoTransport",
            dependencies: ["StenoCore", "StenoSystem", "CLibWebSockets", "CLwsShims", "CLibUVShims"]),
        // A small Redis client (hiredis, blocking), for channels across instances.
        .target(name: "StenoRedis", dependencies: ["CHiredis"]),
        // The service: routes, sessions, channels, Steno's metrics, static files.
        .target(
            name: "StenoServer",
            dependencies: ["StenoCore", "StenoAudio", "StenoSpeech", "StenoSession", "StenoTransport",
                           "StenoWorkers", "StenoPrometheus", "StenoSystem", "StenoRedis", "CCrypto"]),
        // The command line: serve, transcribe, send, listen, and one flag parser for all of them.
        .executableTarget(
            name: "steno",
            dependencies: ["StenoCore", "StenoAudio", "StenoSpeech", "StenoSession", "StenoServer", "StenoSystem",
                           "StenoTransport", "StenoRedis", "StenoWhisper", "CAlsa", "CAlsaShims", "CCurlShims"]),

        // Benchmarks: `make bench` prints their tables.
        .systemLibrary(name: "CEpoll", path: "bench/Sources/CEpoll"),
        .executableTarget(
            name: "steno-bench",
            dependencies: ["StenoCore", "StenoAudio", "StenoSpeech", "StenoSession", "StenoServer",
                           "StenoSystem", "StenoTestSupport",
                           "COpus", "COpusShims", "CSoxr", "CPocketSphinx", "CEpoll"],
            path: "bench/Sources/steno-bench"),

        // What the tests and the benchmarks share: raw-socket WebSocket and HTTP clients, child
        // processes, the seeded generator (StenoCoreTests uses only that, and links the rest).
        .target(name: "StenoTestSupport", dependencies: ["StenoCore", "StenoSystem", "StenoTransport"], path: "Tests/StenoTestSupport"),

        .testTarget(name: "StenoCoreTests", dependencies: ["StenoCore", "StenoTestSupport"]),
        .testTarget(name: "StenoWorkersTests", dependencies: ["StenoWorkers"]),
        .testTarget(name: "StenoSessionTests", dependencies: ["StenoSession", "StenoSpeech", "StenoCore", "StenoSystem", "StenoWorkers"]),
        .testTarget(name: "StenoWhisperTests",
                    dependencies: ["StenoWhisper", "StenoSpeech", "StenoAudio", "StenoCore", "StenoSystem", "StenoTestSupport"]),
        .testTarget(name: "StenoPrometheusTests", dependencies: ["StenoPrometheus"]),
        .testTarget(name: "StenoRedisTests", dependencies: ["StenoRedis", "CHiredis", "StenoTestSupport"]),
        .testTarget(
            name: "StenoAudioTests",
            dependencies: ["StenoAudio", "COpus", "COpusShims"],
            resources: [.copy("Resources")]),
        .testTarget(
            name: "StenoSpeechTests",
            dependencies: ["StenoSpeech", "StenoAudio", "StenoSession", "StenoSystem", "StenoTestSupport"],
            resources: [.copy("Resources")]),
        .testTarget(
            name: "StenoTransportTests",
            dependencies: ["StenoTransport", "StenoTestSupport"]),
        .testTarget(
            name: "StenoServerTests",
            dependencies: ["StenoServer", "StenoSystem", "StenoTestSupport", "StenoRedis", "steno", "COpus", "COpusShims"],
            resources: [.copy("Resources")]),
        .testTarget(
            name: "StenoCLITests",
            dependencies: ["steno", "StenoCore", "StenoAudio", "StenoServer", "StenoSpeech", "StenoSystem",
                           "StenoTestSupport", "StenoRedis"],
            resources: [.copy("Resources")]),
    ]
)
