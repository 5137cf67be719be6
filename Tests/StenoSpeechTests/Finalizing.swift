import Foundation
import StenoCore
import StenoSystem
import Testing
@testable import StenoSpeech

@Suite struct Finalizing {
    /// `endUtterance()` in the middle of a sentence makes everything heard so far final at
    /// once; the rest of the sentence goes on in a new result.
    @Test func endUtteranceInTheMiddleOfASentence() throws {
        let audio = try TestAudio.load("librivox/sense_and_sensibility_01_austen_64kb-0870.wav")
        let cut = 48000  // 3.0 s, inside "...to consider how much..."
        let recognizer = try SharedEngine.get().makeRecognizer()
        let floats = audio.floats
        var before = try recognizer.accept(Array(floats[0..<cut]))
        #expect(before.finals.isEmpty)  // continuous speech: no endpoint yet
        before += try recognizer.endUtterance()
        let finalized = before.finals
        #expect(finalized.count == 1)
        let first = try #require(finalized.first)
        #expect(first.words.count >= 5)
        #expect(first.range.end <= 3.0)

        let after = try recognizer.accept(Array(floats[cut...])) + recognizer.finish()
        let rest = after.finals
        #expect(!rest.isEmpty)
        let next = try #require(rest.first)
        #expect(next.range.start >= 3.0)
        #expect(!next.text.isEmpty)
        // Speech went on across the cut: no speech-ended/started pair there.
        let speech = (before + after).speech
        #expect(speech.map(\.started) == [true, false])
    }

    /// Without the second pass (`-fwdflat no`) the first pass's lattice of an utterance cut in
    /// the middle of speech has no end node (its last frames have no word exit), so
    /// pocketsphinx has no best path after the utterance ends: the words come from the first
    /// pass's own path instead (the one partials show), not lost, with no posteriors
    /// (confidence 0), and the rest of the speech goes on as with the second pass.
    @Test func endUtteranceInTheMiddleOfASentenceWithoutTheSecondPass() throws {
        let audio = try TestAudio.load("librivox/sense_and_sensibility_01_austen_64kb-0870.wav")
        let cut = 48000
        // Steno's options with the second pass off, whether or not they turn it off already
        // (pocketsphinx refuses an option given twice).
        var arguments = PocketSphinxConfiguration.recommendedArguments
        if let at = arguments.firstIndex(of: "-fwdflat") { arguments.removeSubrange(at...at + 1) }
        let engine = try PocketSphinxEngine(configuration: PocketSphinxConfiguration(
            arguments: arguments + ["-fwdflat", "no"], recognizers: 1))
        let recognizer = try engine.makeRecognizer()
        let floats = audio.floats
        var before = try recognizer.accept(Array(floats[0..<cut]))
        let partial = try #require(before.volatiles.last)
        before += try recognizer.endUtterance()
        let first = try #require(before.finals.first)
        #expect(before.finals.count == 1)
        #expect(first.words.count >= 5)
        #expect(first.range.end <= 3.0)
        #expect(first.words.allSatisfy { $0.confidence == 0 })
        // The words the client saw last are not lost (the final has the frames after them too).
        #expect(first.text.hasPrefix(partial.text.split(separator: " ").dropLast().joined(separator: " ")))

        let after = try recognizer.accept(Array(floats[cut...])) + recognizer.finish()
        let next = try #require(after.finals.first)
        #expect(next.range.start >= 3.0)
        #expect(next.words.contains { $0.confidence > 0 }, "an utterance the detector ended has its lattice")
    }

    /// A small maximum utterance length forces finals in continuous speech; each final is no
    /// longer than the limit plus one block.
    @Test func maxUtteranceLengthForcesFinals() throws {
        let audio = try TestAudio.load("librivox/sense_and_sensibility_01_austen_64kb-0870.wav")
        let limit = 1.5
        let events = try transcribe(audio, options: RecognizerOptions(maxUtteranceSeconds: limit))
        let finals = events.finals
        #expect(finals.count >= 4)
        for result in finals {
            #expect(result.range.duration <= limit + 2048.0 / 16000)
        }
        for (a, b) in zip(finals, finals.dropFirst()) {
            #expect(a.range.end <= b.range.start)
        }
        // The cuts are not voice activity: speech stays started across them.
        #expect(events.speech.filter(\.started).count < finals.count)
        #expect(events.speech.enumerated().allSatisfy { $0.offset % 2 == 0 ? $0.element.started : !$0.element.started })
        // Nothing is lost: the words together are about as many as without the limit.
        let whole = try transcribe(audio).finals.flatMap(\.words).count
        #expect(abs(finals.flatMap(\.words).count - whole) <= 4)
    }

    @Test func finalizeTwiceAndOnSilenceGivesNothing() throws {
        let recognizer = try SharedEngine.get().makeRecognizer()
        #expect(try recognizer.endUtterance().isEmpty)
        #expect(try recognizer.endUtterance().isEmpty)
        #expect(try recognizer.accept([Float](repeating: 0, count: 16000)).isEmpty)
        #expect(try recognizer.endUtterance().isEmpty)
        #expect(try recognizer.finish().isEmpty)
    }
}
