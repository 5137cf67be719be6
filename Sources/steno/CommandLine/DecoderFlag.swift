import StenoSpeech

/// `--decoder`, shared by `steno serve` and `steno transcribe`: pocketsphinx options added
/// after Steno's own defaults, so an operator can tune the search (or try an option a
/// benchmark recommends) without a new build.
enum DecoderFlag {
    static let help = "pocketsphinx options after Steno's, e.g. \"-fwdflat yes -vad_postspeech 40\""
    /// What the help shows as the default: Steno's own options.
    static var defaultText: String { PocketSphinxConfiguration.recommendedArguments.joined(separator: " ") }

    /// Steno's defaults with `extra`'s pairs: one naming an option Steno sets replaces Steno's
    /// value (pocketsphinx refuses an option given twice), the others follow. The last of
    /// several pairs with one name wins.
    static func arguments(adding extra: [String]) -> [String] {
        var result = PocketSphinxConfiguration.recommendedArguments
        for index in stride(from: 0, to: extra.count - 1, by: 2) {
            let (name, value) = (extra[index], extra[index + 1])
            if let at = stride(from: 0, to: result.count - 1, by: 2).first(where: { result[$0] == name }) {
                result[at + 1] = value
            } else {
                result += [name, value]
            }
        }
        return result
    }
}
