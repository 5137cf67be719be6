// swift-tools-version:6.0
import PackageDescription

// C libraries come from Debian packages (installed by scripts/bootstrap.sh);
// nothing is fetched from outside.
let package = Package(
    name: "Steno",
    platforms: [.macOS(.v15)],
    products: [
        .executable(name: "steno", targets: ["steno"]),
        .library(name: "StenoCore", targets: ["StenoCore"]),
        .library(name: "StenoAudio", targets: ["StenoAudio"]),
        .library(name: "StenoSpeech", targets: ["StenoSpeech"]),
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

        // What Swift cannot call directly: variadic C functions and macros.
        .target(
            name: "CStenoShims",
            dependencies: ["CLibWebSockets", "COpus", "CPocketSphinx"]),

        // Pure Swift: wire messages, session state machine, transcripts, captions, flow control.
        .target(name: "StenoCore"),
        // PCM conversion, Opus decoding, resampling, the audio clock.
        .target(
            name: "StenoAudio",
            dependencies: ["StenoCore", "COpus", "CSoxr", "CStenoShims"]),
        // The recognizer protocol and the pocketsphinx transcriber.
        .target(
            name: "StenoSpeech",
            dependencies: ["StenoCore", "StenoAudio", "CPocketSphinx", "CStenoShims"]),
        // The only module that touches libwebsockets.
        .target(
            name: "StenoServer",
            dependencies: ["StenoCore", "StenoAudio", "StenoSpeech", "CLibWebSockets", "CStenoShims"]),
        .executableTarget(
            name: "steno",
            dependencies: ["StenoCore", "StenoAudio", "StenoSpeech", "StenoServer"]),

        // Benchmarks: `make bench` prints their tables.
        .executableTarget(
            name: "steno-bench",
            dependencies: ["StenoCore", "StenoAudio", "StenoSpeech", "StenoServer", "StenoTestSupport",
                           "COpus", "CSoxr", "CPocketSphinx", "CStenoShims"],
            path: "bench/Sources/steno-bench"),

        // Raw-socket WebSocket and HTTP clients for the server's tests and benchmarks.
        .target(name: "StenoTestSupport", path: "Tests/StenoTestSupport"),

        .testTarget(name: "StenoCoreTests", dependencies: ["StenoCore"]),
        .testTarget(
            name: "StenoAudioTests",
            dependencies: ["StenoAudio", "COpus", "CStenoShims"],
            resources: [.copy("Resources")]),
        .testTarget(
            name: "StenoSpeechTests",
            dependencies: ["StenoSpeech", "StenoAudio"],
            resources: [.copy("Resources")]),
        .testTarget(
            name: "StenoCLITests",
            dependencies: ["steno", "StenoCore"],
            resources: [.copy("Resources")]),
        .testTarget(
            name: "StenoServerTests",
            dependencies: ["StenoServer", "StenoTestSupport", "steno", "COpus", "CStenoShims"],
            resources: [.copy("Resources")]),
    ]
)
