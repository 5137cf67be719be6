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

// MARK: - Same words as the batch CLI

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

// MARK: - Time accounting

@Suite struct Times {
    /// Word and result times lie inside the audio and increase, a final's range covers its
    /// words, results do not overlap, partials lie after the last final.
    @Test func timesAreOrderedAndInsideTheAudio() throws {
        let audio = try TestAudio.load("beckett.wav")
        let (events, _) = try SharedTranscriptions.get("beckett.wav")
        #expect(events.finals.count == 5)
        var partialText: String?
        var lastFinalEnd = 0.0
        var lastWordEnd = 0.0
        for event in events {
            switch event {
            case .final(let result):
                #expect(result.range.start >= lastFinalEnd)
                #expect(result.range.start < result.range.end)
                #expect(result.range.end <= audio.duration)
                #expect(!result.words.isEmpty)
                #expect(result.text == result.words.map(\.text).joined(separator: " "))
                for word in result.words {
                    #expect(result.range.contains(word.range))
                    #expect(word.range.start >= lastWordEnd)
                    #expect(word.range.start < word.range.end)
                    #expect((0...1).contains(word.confidence))
                    lastWordEnd = word.range.end
                }
                lastFinalEnd = result.range.end
                partialText = nil
            case .partial(let result):
                #expect(result.text != partialText)  // only when the text changes
                partialText = result.text
                #expect(result.range.start >= lastFinalEnd)
                #expect(result.range.end <= audio.duration)
                for word in result.words {
                    #expect(result.range.contains(word.range))
                    #expect(word.confidence == 0)
                }
            case .speechStarted(let at), .speechEnded(let at):
                #expect((0...audio.duration).contains(at))
            }
        }
    }

    /// pocketsphinx drops silence frames and restarts its frame grid at each utterance: words
    /// must still land where they were said. 5 s of digital silence before a sentence moves
    /// every word by exactly 5 s (80000 samples is a whole number of 10 ms frames, so the
    /// frames line up); an odd offset moves them by the offset, within the protocol's 20 ms
    /// (the frames then cut the sound differently, and the alignment may move by a frame).
    @Test(arguments: [80000, 80050, 8123])
    func leadingSilenceMovesWordsByItsLength(silence: Int) throws {
        let audio = try TestAudio.load("librivox/sense_and_sensibility_01_austen_64kb-0880.wav")
        let plain = try SharedTranscriptions.get(audio.name).events.finals.flatMap(\.words)
        let padded = try transcribe(audio.afterSilence(samples: silence)).finals.flatMap(\.words)
        let shift = Double(silence) / 16000
        #expect(padded.map(\.text) == plain.map(\.text))
        #expect(plain.count == 8)
        let tolerance = silence % 160 == 0 ? 1e-9 : 0.02
        for (before, after) in zip(plain, padded) {
            #expect(abs(after.range.start - before.range.start - shift) <= tolerance, "\(after.text)")
            #expect(abs(after.range.end - before.range.end - shift) <= tolerance, "\(after.text)")
        }
    }

    /// The same for a later utterance: more silence between two utterances moves the second
    /// one's words by exactly that much. (81920 samples = 5.12 s is a whole number of both
    /// 2048-sample blocks and 160-sample frames, so the second utterance is cut into the same
    /// blocks and frames; digital silence leaves the detector's noise estimate as it was.)
    @Test func moreSilenceBetweenUtterancesMovesTheLaterWords() throws {
        let first = try TestAudio.load("cards/002.wav")
        let second = try TestAudio.load("cards/004.wav")
        let near = try transcribe(first.appending(second.afterSilence(samples: 32000))).finals
        let far = try transcribe(first.appending(second.afterSilence(samples: 32000 + 81920))).finals
        #expect(near.count == 2)
        #expect(far.map(\.text) == near.map(\.text))
        let moved = try #require(far.last).words
        let original = try #require(near.last).words
        #expect(!original.isEmpty)
        for (a, b) in zip(original, moved) {
            #expect(abs(b.range.start - a.range.start - 5.12) < 1e-9, "\(b.text)")
            #expect(abs(b.range.end - a.range.end - 5.12) < 1e-9, "\(b.text)")
        }
        // The first utterance is not affected at all.
        #expect(far.first == near.first)
    }

    @Test func receivedAndAnalyzedSeconds() throws {
        let recognizer = try SharedEngine.get().makeRecognizer()
        _ = try recognizer.accept([Float](repeating: 0, count: 5000))
        #expect(recognizer.receivedSeconds == 5000.0 / 16000)
        #expect(recognizer.analyzedSeconds == 4096.0 / 16000)  // two 2048-sample blocks
        _ = try recognizer.endUtterance()
        #expect(recognizer.analyzedSeconds == recognizer.receivedSeconds)
        recognizer.cancel()
    }
}

// MARK: - Finalize, maximum length

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

// MARK: - Voice activity

@Suite struct VoiceActivity {
    /// Speech events alternate, lie inside the audio, and bracket the words: each final's
    /// words lie in one speech segment (give or take a frame or two of alignment).
    @Test func speechEventsBracketTheWords() throws {
        let events = try SharedTranscriptions.get("beckett.wav").events
        let speech = events.speech
        #expect(speech.count == 10)
        #expect(speech.enumerated().allSatisfy { $0.offset % 2 == 0 ? $0.element.started : !$0.element.started })
        #expect(zip(speech, speech.dropFirst()).allSatisfy { $0.at <= $1.at })
        let segments = stride(from: 0, to: speech.count - 1, by: 2).map { (speech[$0].at, speech[$0 + 1].at) }
        for (result, segment) in zip(events.finals, segments) {
            #expect(result.range.start >= segment.0 - 0.1, "\(result.text)")
            #expect(result.range.end <= segment.1 + 0.1, "\(result.text)")
        }
    }

    /// The standalone detector (no model) reports exactly the recognizer's speech events, and
    /// does not care about chunking either.
    @Test func standaloneDetectorAgreesWithTheRecognizer() throws {
        let audio = try TestAudio.load("beckett.wav")
        let recognized = try SharedTranscriptions.get("beckett.wav").events.speech
        for chunk in [320, 4999] {
            let detector = try SharedEngine.get().makeSpeechDetector()
            var events: [TranscriberEvent] = []
            var start = 0
            let floats = audio.floats
            while start < floats.count {
                events += detector.accept(Array(floats[start..<min(floats.count, start + chunk)]))
                start += chunk
            }
            events += detector.finish()
            #expect(events.speech.map(\.started) == recognized.map(\.started))
            #expect(events.speech.map(\.at) == recognized.map(\.at))
        }
    }
}

// MARK: - Determinism

@Suite struct Determinism {
    /// Chunking cannot change anything: all events (partials and speech times too) are the
    /// same for 20 ms, 1 s and odd-sized chunks.
    @Test func chunkSizeDoesNotMatter() throws {
        let beckett = try TestAudio.load("beckett.wav")
        // The first three utterances (4.6 s), to keep the test quick.
        let audio = TestAudio(name: "beckett, 4.6 s", samples: Array(beckett.samples.prefix(73600)), sampleRate: 16000)
        #expect(try transcribe(audio).finals.count == 3)
        let reference = try transcribe(audio, chunk: 320)
        #expect(try transcribe(audio, chunk: 16000) == reference)
        #expect(try transcribe(audio, chunk: 777) == reference)
    }

    /// A decoder that has run other audio gives a file the same events as a fresh decoder.
    /// An engine of its own with one decoder makes sure the same decoder is reused.
    @Test func sameEventsAfterOtherAudio() throws {
        let engine = try PocketSphinxEngine(configuration: PocketSphinxConfiguration(recognizers: 1))
        let file = try TestAudio.load("cards/005.wav")
        let other = try TestAudio.load("librivox/sense_and_sensibility_01_austen_64kb-0920.wav")
        let fresh = try transcribe(file, with: engine.makeRecognizer())
        _ = try transcribe(other, with: engine.makeRecognizer())
        // A session cancelled in the middle of speech, with an utterance open.
        let cancelled = try engine.makeRecognizer()
        _ = try cancelled.accept(Array(other.floats.prefix(30000)))
        cancelled.cancel()
        let reused = try transcribe(file, with: engine.makeRecognizer())
        #expect(engine.decodersMade == 1)
        #expect(reused == fresh)
        #expect(!fresh.finals.isEmpty)
    }

    /// What carries over between a session's utterances is its own: after other speech in the
    /// same session a file comes out differently (the cepstral mean has moved, which is why it
    /// is the session's to keep), while another session's speech on the same decoder changes
    /// nothing (so the test above tests something).
    @Test func aSessionsMeanCarriesOverItsUtterancesAndNoOneElses() throws {
        let file = try TestAudio.load("cards/002.wav")
        let other = try TestAudio.load("cards/005.wav")
        let alone = try transcribe(file).finals
        let afterOther = try transcribe(other.appending(file)).finals
        #expect(Array(afterOther.suffix(alone.count)) != alone)
    }

    /// Many sessions' speech interleaved through two shared decoders: every session gets
    /// exactly the finals (words, times, confidences) of the same file recognized alone, as
    /// `steno transcribe` recognizes it. Sessions that find no decoder free wait, and go on
    /// when one is given back.
    @Test func pooledDecodersGiveEverySessionTheFinalsOfADecoderOfItsOwn() throws {
        let names = ["beckett.wav", "cards/001.wav", "cards/003.wav", "cards/005.wav",
                     "librivox/sense_and_sensibility_01_austen_64kb-0870.wav",
                     "librivox/sense_and_sensibility_01_austen_64kb-0930.wav"]
        let files = try names.map { try TestAudio.load($0) }
        let alone = try files.map { try transcribe($0).finals }
        let engine = try PocketSphinxEngine(configuration: PocketSphinxConfiguration(recognizers: 2))
        final class Flag: Sendable {
            let raised = Locked(false)
        }
        let woken = files.map { _ in Flag() }
        let recognizers = try files.indices.map { i in
            try engine.makePocketSphinxRecognizer(wake: { woken[i].raised.withLock { $0 = true } })
        }
        var events = files.map { _ in [TranscriberEvent]() }
        var offsets = files.map { _ in 0 }
        var done = files.map { _ in false }
        var finishing = files.map { _ in false }
        var waits = 0
        // Each session in turn gets the next 0.1 s of its file (staggered starts), as a server's
        // lanes would; one that waits gets nothing until it is woken.
        var round = 0
        while done.contains(false) {
            round += 1
            for i in files.indices where !done[i] && round > i * 3 {
                let r = recognizers[i]
                if r.isWaiting {
                    guard woken[i].raised.withLock({ value in defer { value = false }; return value }) else { continue }
                    events[i] += try r.proceed()
                    if finishing[i] && !r.isWaiting { done[i] = true }
                    continue
                }
                let samples = files[i].floats
                if offsets[i] < samples.count {
                    let next = min(samples.count, offsets[i] + 1600)
                    events[i] += try r.accept(Array(samples[offsets[i]..<next]))
                    offsets[i] = next
                    if r.isWaiting { waits += 1 }
                } else {
                    finishing[i] = true
                    events[i] += try r.finish()
                    if r.isWaiting { waits += 1 } else { done[i] = true }
                }
            }
            #expect(round < 100_000, "the sessions got stuck")
            if round >= 100_000 { break }
        }
        #expect(waits > 0, "with 6 sessions on 2 decoders some had to wait")
        for i in files.indices {
            #expect(events[i].finals == alone[i], "\(names[i])")
        }
        #expect(engine.decoderStats.made <= 2)
        #expect(engine.decoderStats.lent == 0 && engine.decoderStats.waiting == 0, "\(engine.decoderStats)")
    }

    /// The design before shared decoders (kept for the benchmarks): a session keeps its decoder
    /// between utterances, and gets the same finals.
    @Test func aSessionThatKeepsItsDecoderGetsTheSameFinals() throws {
        let engine = try PocketSphinxEngine(configuration: PocketSphinxConfiguration(recognizers: 2))
        let audio = try TestAudio.load("beckett.wav")
        let shared = try transcribe(audio, with: engine.makeRecognizer()).finals
        let keeping = try engine.makeRecognizer(options: RecognizerOptions(keepsDecoder: true))
        let floats = audio.floats
        var events = try keeping.accept(Array(floats.prefix(40000)))
        #expect(!events.finals.isEmpty)
        #expect(engine.load.busy == 1, "kept after its first utterance")
        events += try keeping.accept(Array(floats.dropFirst(40000))) + keeping.finish()
        #expect(events.finals == shared)
        #expect(engine.load.busy == 0)
    }

    /// Sessions on several threads at once get the same results as one alone.
    @Test func concurrentSessionsAreIndependent() async throws {
        let audio = try TestAudio.load("cards/002.wav")
        let alone = try transcribe(audio)
        let results = try await withThrowingTaskGroup(of: [TranscriberEvent].self) { group in
            for _ in 0..<3 {
                group.addTask { try transcribe(audio) }
            }
            return try await group.reduce(into: []) { $0.append($1) }
        }
        #expect(results.count == 3)
        for events in results {
            #expect(events == alone)
        }
    }
}

// MARK: - Bad input, errors

@Suite struct BadInput {
    @Test func strangeSamplesAreClippedNotFatal() throws {
        let recognizer = try SharedEngine.get().makeRecognizer()
        var noise: [Float] = [.nan, .infinity, -.infinity, 1e30, -1e30, .greatestFiniteMagnitude, -0.0, .leastNonzeroMagnitude]
        noise += (0..<40000).map { Float(($0 * 7919) % 2001 - 1000) / 10 }  // loud garbage, ±100
        _ = try recognizer.accept(noise)
        _ = try recognizer.accept([])
        _ = try recognizer.accept(UnsafeBufferPointer<Float>(start: nil, count: 0))
        let events = try recognizer.finish()
        for case .final(let result) in events {
            for word in result.words {
                #expect(word.range.start.isFinite && word.range.end.isFinite)
            }
        }
    }

    @Test func useAfterFinishOrCancelIsATypedError() throws {
        let recognizer = try SharedEngine.get().makeRecognizer()
        _ = try recognizer.finish()
        #expect(throws: StenoError.self) { try recognizer.accept([0.1, 0.2]) }
        #expect(throws: StenoError.self) { try recognizer.endUtterance() }
        #expect(throws: StenoError.self) { try recognizer.finish() }
        recognizer.cancel()
        recognizer.cancel()

        let other = try SharedEngine.get().makeRecognizer()
        other.cancel()
        do {
            _ = try other.accept([0])
            Issue.record("accept after cancel should throw")
        } catch {
            #expect(error.code == .internal)
        }
    }

    @Test func pcm16ConversionIsExactForSixteenBitInput() {
        let mismatches = (Int32(Int16.min)...Int32(Int16.max)).filter { value in
            PocketSphinxRecognizer.pcm16(Float(value) / 32768) != Int16(value)
        }
        #expect(mismatches.isEmpty)
        #expect(PocketSphinxRecognizer.pcm16(.nan) == 0)
        #expect(PocketSphinxRecognizer.pcm16(2) == Int16.max)
        #expect(PocketSphinxRecognizer.pcm16(-2) == Int16.min)
        #expect(PocketSphinxRecognizer.pcm16(.infinity) == Int16.max)
    }

    @Test func fillersAndAlternatePronunciations() {
        #expect(PocketSphinxRecognizer.spokenWord("<s>") == nil)
        #expect(PocketSphinxRecognizer.spokenWord("</s>") == nil)
        #expect(PocketSphinxRecognizer.spokenWord("<sil>") == nil)
        #expect(PocketSphinxRecognizer.spokenWord("[NOISE]") == nil)
        #expect(PocketSphinxRecognizer.spokenWord("[SPEECH]") == nil)
        #expect(PocketSphinxRecognizer.spokenWord("++GARBAGE++") == nil)
        #expect(PocketSphinxRecognizer.spokenWord("") == nil)
        #expect(PocketSphinxRecognizer.spokenWord("was(2)") == "was")
        #expect(PocketSphinxRecognizer.spokenWord("to(12)") == "to")
        #expect(PocketSphinxRecognizer.spokenWord("i've") == "i've")
        #expect(PocketSphinxRecognizer.spokenWord("(2)") == "(2)")
        #expect(PocketSphinxRecognizer.spokenWord("a(b)") == "a(b)")
    }

    @Test func badConfigurationsAreTypedErrors() throws {
        var missing = PocketSphinxConfiguration(modelDirectory: "/nonexistent/en-us")
        #expect(throws: StenoError.self) { try PocketSphinxEngine(configuration: missing) }
        missing = PocketSphinxConfiguration(arguments: ["-logfn", "/tmp/x"])
        #expect(throws: StenoError.self) { try PocketSphinxEngine(configuration: missing) }
        missing = PocketSphinxConfiguration(arguments: ["-maxhmmpf"])
        #expect(throws: StenoError.self) { try PocketSphinxEngine(configuration: missing) }
        missing = PocketSphinxConfiguration(maxUtteranceSeconds: 0)
        #expect(throws: StenoError.self) { try PocketSphinxEngine(configuration: missing) }
        missing = PocketSphinxConfiguration(blockSamples: 10)
        #expect(throws: StenoError.self) { try PocketSphinxEngine(configuration: missing) }
        #expect(throws: StenoError.self) {
            try SharedEngine.get().makeRecognizer(options: RecognizerOptions(maxUtteranceSeconds: -1))
        }
        // pocketsphinx itself refuses the value: its reason is in the message.
        do {
            _ = try PocketSphinxDecoder(arguments: PocketSphinxConfiguration(arguments: ["-maxhmmpf", "many"]).decoderArguments)
            Issue.record("a bad value should be refused")
        } catch {
            #expect(error.message.contains("-maxhmmpf"))
        }
        // A file that is not a language model: ps_init fails, the reason is kept.
        do {
            _ = try PocketSphinxDecoder(arguments: PocketSphinxConfiguration(languageModel: "/etc/hostname").decoderArguments)
            Issue.record("a bad language model should be refused")
        } catch {
            #expect(error.message.contains("hostname"))
        }
    }
}
