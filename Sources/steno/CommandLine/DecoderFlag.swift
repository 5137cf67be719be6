import StenoSpeech

/// `--decoder`, shared by `steno serve` and `steno transcribe`: pocketsphinx options added
/// after Steno's own defaults, so an operator can tune the search (or try an option a
/// benchmark recommends) without a new build.
enum DecoderFlag {
    static let help = "pocketsphinx options after Steno's, e.g. \"-fwdflat yes -vad_postspeech 40\""
    /// What the help shows as the default: Steno's own options.
    static var defaultText: String { PocketSphinxConfiguration.recommendedArguments.joined(separator: " ") }

    /// Steno's defaults with `extra`'s pairs (`PocketSphinxConfiguration.arguments(setting:)`):
    /// one naming an option Steno sets replaces Steno's value, the others follow.
    static func arguments(adding extra: [String]) -> [String] {
        PocketSphinxConfiguration.arguments(setting: extra)
    }
}
