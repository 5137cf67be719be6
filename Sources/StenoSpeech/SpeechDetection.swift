import StenoCore

/// How the sessions of an engine that hears whole utterances (Whisper) find them: a speech
/// detector that belongs to no engine. `silero` (the default where `.venv` has it: it holds
/// in noise) or `energy` (pocketsphinx's detector, no model: made for clean speech). Both put a
/// cheap gate first, so a quiet session costs next to nothing (`quietBelow`).
public struct SpeechDetection: Sendable {
    /// What `steno serve --speech-detector` and `/metrics` call it.
    public let name: String
    private let make: @Sendable (_ postSpeech: Double) throws(StenoError) -> any VoiceDetector

    /// Blocks below this (dBFS RMS) heard while no speech is open are passed over: a quiet
    /// session then costs almost nothing (the detector was ≈1 ms of CPU per second of a quiet
    /// room's audio, the most of a quiet crowd's cost). Speech is far above it (−20 to −35
    /// dBFS; a soft voice at a distance −45).
    public static let quietBelow = -50.0
    /// Seconds pocketsphinx's detector hears first for its noise estimate alone: a quiet room
    /// would otherwise start every session with half a second of "speech".
    public static let settling = 0.64

    /// A detector for one session that ends speech after `postSpeech` seconds of silence.
    public func makeDetector(postSpeech: Double) throws(StenoError) -> any VoiceDetector {
        try make(postSpeech)
    }

    /// Silero VAD v6 (`SileroVAD`, its handles lent while a session hears sound).
    public static func silero(_ vad: SileroVAD) -> SpeechDetection {
        SpeechDetection(name: "silero") { (postSpeech: Double) throws(StenoError) -> any VoiceDetector in
            SileroSpeechDetector(vad: vad, settings: .init(postSpeech: postSpeech, quietBelow: quietBelow))
        }
    }

    /// pocketsphinx's energy detector (`PocketSphinxSpeechDetector`; no model is loaded for it).
    public static func energy(_ engine: PocketSphinxEngine) -> SpeechDetection {
        SpeechDetection(name: "energy") { (postSpeech: Double) throws(StenoError) -> any VoiceDetector in
            try engine.makeSpeechDetector(settling: settling, quietBelow: quietBelow, postSpeech: postSpeech)
        }
    }
}
