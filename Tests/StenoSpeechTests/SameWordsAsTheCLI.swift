import Foundation
import StenoCore
import StenoSystem
import Testing
@testable import StenoSpeech

// Real pocketsphinx, the installed en-us model, real speech (Resources/: Debian's
// pocketsphinx-testdata librivox/ and cards/ files, and beckett.wav, copied in so that the
// tests do not depend on anything but the model). Recognizers come from one shared engine
// unless a test needs its own pool.

let testFiles = [
    "librivox/sense_and_sensibility_01_austen_64kb-0870.wav",
    "librivox/sense_and_sensibility_01_austen_64kb-0880.wav",
    "librivox/sense_and_sensibility_01_austen_64kb-0890.wav",
    "librivox/sense_and_sensibility_01_austen_64kb-0920.wav",
    "librivox/sense_and_sensibility_01_austen_64kb-0930.wav",
    "cards/001.wav", "cards/002.wav", "cards/003.wav", "cards/004.wav", "cards/005.wav",
    "beckett.wav",
]

@Suite struct SameWordsAsTheCLI {
    /// Each file's finals, one per utterance, have exactly the words `pocketsphinx_continuous
    /// -infile` printed for it (recorded in Resources/cli-expected.txt; beckett.wav has five
    /// utterances, so endpointing is compared too), with the same options.
    @Test(arguments: testFiles)
    func finalsMatchRecordedCLIOutput(file: String) throws {
        let expected = try #require(try recordedCLIOutput()[file], "no recorded CLI output for \(file)")
        let events = try SharedTranscriptions.get(file, cliDefaults: true).events
        #expect(events.finals.map(\.text) == expected)
    }

    /// Steno's default options (`recommendedArguments`) keep the equivalence: the CLI run with
    /// the same options says the same. (On these files they also say what pocketsphinx's
    /// defaults say: same words, less CPU.)
    @Test(arguments: ["librivox/sense_and_sensibility_01_austen_64kb-0880.wav", "cards/005.wav"])
    func defaultOptionsMatchTheCLIWithTheSameOptions(file: String) throws {
        let cli = try runCLI(file, arguments: PocketSphinxConfiguration.recommendedArguments)
        let events = try transcribe(TestAudio.load(file))
        #expect(events.finals.map(\.text) == cli)
        #expect(cli == (try recordedCLIOutput()[file]))
    }

    /// Confidences are the word posteriors pocketsphinx computes from the final lattice
    /// (`ps_seg_prob` through logmath), the same numbers the CLI prints with `-time yes`
    /// (Resources/cli-times.txt, beckett.wav: 5 utterances).
    @Test func confidencesAreTheCLIPosteriors() throws {
        let text = try String(contentsOf: TestAudio.resourceURL("cli-times.txt"), encoding: .utf8)
        let expected: [(String, Double)] = text.split(separator: "\n").compactMap { line in
            let fields = line.split(separator: " ")
            guard fields.count == 4, let word = PocketSphinxRecognizer.spokenWord(String(fields[0])),
                  let confidence = Double(fields[3]) else { return nil }
            return (word, confidence)
        }
        let words = try SharedTranscriptions.get("beckett.wav", cliDefaults: true).events.finals.flatMap(\.words)
        #expect(words.map(\.text) == expected.map(\.0))
        for (word, (_, confidence)) in zip(words, expected) {
            #expect(abs(word.confidence - confidence) < 1e-6, "\(word.text)")
        }
    }

    /// The recording is only worth something while it is what the installed CLI says: run
    /// the CLI on two short files and compare (catches a changed pocketsphinx package; then
    /// run Resources/regenerate-cli-expected.sh).
    @Test(arguments: ["cards/001.wav", "cards/004.wav"])
    func recordingStillMatchesInstalledCLI(file: String) throws {
        #expect(try runCLI(file) == (try recordedCLIOutput()[file]))
    }
}
