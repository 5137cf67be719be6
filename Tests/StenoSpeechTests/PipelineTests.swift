import Dispatch
import StenoAudio
import StenoCore
import StenoSession
import Testing
@testable import StenoSpeech

/// TranscriptionPipeline with the real recognizer: the session timeline through resampling,
/// and finalize at the end of input and before it.
@Suite struct PipelineTests {
    static func s16(_ samples: [Int16]) -> [UInt8] {
        var bytes = [UInt8](repeating: 0, count: samples.count * 2)
        for (i, s) in samples.enumerated() {
            bytes[2 * i] = UInt8(truncatingIfNeeded: s)
            bytes[2 * i + 1] = UInt8(truncatingIfNeeded: s >> 8)
        }
        return bytes
    }

    static func pipeline(rate: Int = 16000, encoding: AudioEncoding = .pcmS16LE) throws -> TranscriptionPipeline {
        let recognizer = try SharedEngine.get().makeRecognizer(options: RecognizerOptions())
        return try TranscriptionPipeline(
            format: AudioFormat(encoding: encoding, sampleRate: rate, channels: 1), recognizer: recognizer)
    }

    /// Feeds 16-bit samples in 20 ms messages; returns the events of each message in order.
    static func feed(_ pipeline: TranscriptionPipeline, _ samples: [Int16], rate: Int,
                     from: Int = 0, to: Int? = nil) throws -> [TranscriberEvent] {
        var events: [TranscriberEvent] = []
        let step = rate / 50
        var i = from
        let end = min(to ?? samples.count, samples.count)
        while i < end {
            let j = min(end, i + step)
            events += try pipeline.append(s16(Array(samples[i..<j]))).events
            i = j
        }
        return events
    }

    static func words(_ finals: [RecognitionResult]) -> [String] {
        finals.flatMap { $0.words.map(\.text) }
    }

    static func checkInvariants(_ finals: [RecognitionResult], duration: Double) {
        var previousEnd = 0.0
        for final in finals {
            #expect(final.range.start >= previousEnd - 1e-9, "finals overlap: \(final.range)")
            #expect(final.range.end <= duration + 0.001)
            for word in final.words {
                #expect(final.range.contains(word.range), "\(word.text) \(word.range) outside \(final.range)")
            }
            previousEnd = final.range.end
        }
    }

    @Test func resampledInputKeepsTheTimeline() throws {
        let audio = try TestAudio.load("beckett.wav")
        let p16 = try Self.pipeline()
        let reference = try (Self.feed(p16, audio.samples, rate: 16000) + p16.finish()).finals

        // The same speech at 44.1 kHz, after 1.5 s of silence: every word 1.5 s later.
        let resampler = try Resampler(inputRate: 16000, outputRate: 44100)
        var up = resampler.process(audio.floats)
        up += resampler.flush()
        let samples = [Int16](repeating: 0, count: 66150) + up.map { Int16(max(-32768, min(32767, ($0 * 32768).rounded()))) }
        let p44 = try Self.pipeline(rate: 44100)
        let shifted = try (Self.feed(p44, samples, rate: 44100) + p44.finish()).finals
        Self.checkInvariants(shifted, duration: Double(samples.count) / 44100)

        #expect(Self.words(shifted) == Self.words(reference))
        for (a, b) in zip(reference.flatMap(\.words), shifted.flatMap(\.words)) where a.text == b.text {
            #expect(abs(b.range.start - 1.5 - a.range.start) <= 0.021, "\(a.text): \(a.range.start) vs \(b.range.start)")
            #expect(abs(b.range.end - 1.5 - a.range.end) <= 0.021, "\(a.text): \(a.range.end) vs \(b.range.end)")
        }
    }

    @Test func finalizeMidSentenceMakesWhatWasHeardFinal() throws {
        let audio = try TestAudio.load("librivox/sense_and_sensibility_01_austen_64kb-0870.wav")
        let cut = audio.samples.count / 2
        let p = try Self.pipeline()
        var events = try Self.feed(p, audio.samples, rate: 16000, to: cut)
        let atFinalize = events.count
        events += try p.finalize()
        let finalized = Array(events[atFinalize...]).finals
        #expect(finalized.count == 1, "one final for the utterance in progress")
        let cutTime = Double(cut) / 16000
        #expect(finalized.allSatisfy { $0.range.end <= cutTime + 0.001 })
        #expect(!(finalized.first?.words.isEmpty ?? true))

        events += try Self.feed(p, audio.samples, rate: 16000, from: cut)
        events += try p.finish()
        let later = events.finals.filter { $0.range.start >= cutTime - 0.001 }
        #expect(!later.isEmpty, "speech after the finalize continues in a new result")
        Self.checkInvariants(events.finals, duration: audio.duration)
    }

    @Test func finalizeThroughAnEarlierTimeKeepsTheRestVolatile() throws {
        let audio = try TestAudio.load("librivox/sense_and_sensibility_01_austen_64kb-0870.wav")
        let whole = try Self.pipeline()
        let reference = try (Self.feed(whole, audio.samples, rate: 16000) + whole.finish()).finals

        let received = audio.samples.count * 3 / 4
        let through = Double(audio.samples.count / 3) / 16000
        let p = try Self.pipeline()
        var events = try Self.feed(p, audio.samples, rate: 16000, to: received)
        let before = events.count
        let produced = try p.finalize(through: through)
        events += produced
        let finals = produced.finals
        #expect(finals.count == 1)
        if let final = finals.first {
            // The words before `through`, and the final ends at `through` or with its last word.
            #expect(final.words.allSatisfy { ($0.range.start + $0.range.end) / 2 < through })
            #expect(final.range.end >= through - 0.001)
            #expect(final.range.end <= Double(received) / 16000)
        }
        // What follows `through` was heard again: a volatile result after the final.
        #expect(!Array(events[before...]).volatiles.isEmpty)

        events += try Self.feed(p, audio.samples, rate: 16000, from: received)
        events += try p.finish()
        Self.checkInvariants(events.finals, duration: audio.duration)
        // Nothing was lost: about the words of an uninterrupted run (a cut can change a word or two).
        let got = Self.words(events.finals), want = Self.words(reference)
        let common = Set(got).intersection(want).count
        #expect(Double(common) >= 0.7 * Double(Set(want).count), "\(got) vs \(want)")
    }

    /// A `finalize(through:)` that comes while the recognizer waits for a shared decoder (all are
    /// lent), before it has shown anything, is not dropped: once a decoder comes, the words before
    /// the time are final and what follows is heard again, as when it had not waited.
    @Test func finalizeThroughWhileWaitingForADecoderStillCuts() throws {
        let engine = try PocketSphinxEngine(configuration: PocketSphinxConfiguration(recognizers: 1, preparedRecognizers: 1))
        let audio = try TestAudio.load("librivox/sense_and_sensibility_01_austen_64kb-0870.wav")
        // Another session holds the only decoder, in an utterance.
        let holder = try engine.makePocketSphinxRecognizer()
        _ = try holder.accept(Array(audio.floats[0..<(audio.floats.count / 2)]))
        #expect(engine.decoderStats.lent == 1)

        let woken = DispatchSemaphore(value: 0)
        let p = try TranscriptionPipeline(format: AudioFormat(encoding: .pcmS16LE, sampleRate: 16000, channels: 1),
                                          recognizer: engine.makePocketSphinxRecognizer { woken.signal() })
        let received = audio.samples.count * 3 / 4
        let through = Double(audio.samples.count / 3) / 16000
        var events = try Self.feed(p, audio.samples, rate: 16000, to: received)
        #expect(p.isWaiting, "the session heard speech and waits for the decoder")
        #expect(events.finals.isEmpty && events.volatiles.isEmpty)
        events += try p.finalize(through: through)
        holder.cancel()

        // Woken, it goes on: what it produces on the way is what a session would send.
        func settle() throws -> [TranscriberEvent] {
            var produced: [TranscriberEvent] = []
            while p.isWaiting {
                guard woken.wait(timeout: .now() + 120) == .success else {
                    Issue.record("the recognizer was not woken")
                    break
                }
                produced += try p.proceed()
            }
            return produced
        }
        let produced = try settle()
        events += produced
        let finals = produced.finals
        #expect(finals.count == 1, "\(finals.map(\.text))")
        if let final = finals.first {
            #expect(!final.words.isEmpty)
            #expect(final.words.allSatisfy { ($0.range.start + $0.range.end) / 2 < through }, "\(final.words)")
            #expect(final.range.end >= through - 0.001)
            #expect(final.range.end <= Double(received) / 16000)
        }
        // What follows `through` was heard again: a volatile result after the final.
        #expect(!produced.volatiles.isEmpty)

        events += try Self.feed(p, audio.samples, rate: 16000, from: received)
        events += try settle()
        events += try p.finish()
        events += try settle()
        Self.checkInvariants(events.finals, duration: audio.duration)
    }

    @Test func finalizeWithNothingHeardProducesNothing() throws {
        let p = try Self.pipeline()
        let silence = [Int16](repeating: 0, count: 16000)
        _ = try Self.feed(p, silence, rate: 16000)
        #expect(try p.finalize().finals.isEmpty)
        #expect(try p.finalize(through: 0.5).finals.isEmpty)
        #expect(try p.finish().finals.isEmpty)
        #expect(abs(p.receivedSeconds - 1) < 1e-9)
    }

    @Test func cancelReleasesTheRecognizer() throws {
        let engine = try SharedEngine.get()
        let audio = try TestAudio.load("beckett.wav")
        let p = try Self.pipeline()
        _ = try Self.feed(p, audio.samples, rate: 16000, to: 40000)
        let idle = engine.idleDecoders
        p.cancel()
        #expect(engine.idleDecoders == idle + 1)
        #expect(try p.finish().isEmpty)
    }

    @Test func misalignedPCMIsRejectedAndChangesNothing() throws {
        let p = try Self.pipeline()
        #expect(throws: StenoError.self) { _ = try p.append([1, 2, 3]) }
        #expect(p.receivedSeconds == 0)
        _ = try p.append([0, 0])
        #expect(abs(p.receivedSeconds - 1.0 / 16000) < 1e-12)
        p.cancel()
    }

    @Test func aGapPlacesWhatFollowsAfterTheHole() throws {
        let audio = try TestAudio.load("beckett.wav")
        // At 44.1 kHz, so the resampler holds samples when the gap comes.
        let samples44 = Speech44.resample(audio.samples)
        let p = try Self.pipeline(rate: 44100)
        var events = try Self.feed(p, [Int16](repeating: 0, count: 44100), rate: 44100)
        events += try p.gap(seconds: 2.5)
        #expect(abs(p.analyzedSeconds - 3.5) < 1e-3, "nothing waits for analysis across the hole")
        events += try Self.feed(p, samples44, rate: 44100) + p.finish()
        let finals = events.finals
        #expect(!finals.isEmpty)
        let shifted = try (Self.feed(Self.pipeline(rate: 44100), samples44, rate: 44100)).finals
        // Every word lies after the hole, where the same audio alone puts it plus 3.5 s.
        for word in finals.flatMap(\.words) { #expect(word.range.start >= 3.5 - 1e-9, "\(word.text) \(word.range)") }
        #expect(abs((finals.first?.range.start ?? 0) - 3.5 - (shifted.first?.range.start ?? 0)) < 0.03)
        Self.checkInvariants(finals, duration: 3.5 + Double(samples44.count) / 44100)
    }
}

/// Beckett at 44.1 kHz (linear interpolation is enough for a timeline test).
enum Speech44 {
    static func resample(_ samples: [Int16]) -> [Int16] {
        let n = samples.count * 44100 / 16000
        return (0..<n).map { i in
            let x = Double(i) * 16000 / 44100
            let k = Int(x)
            let f = x - Double(k)
            let a = Double(samples[min(k, samples.count - 1)]), b = Double(samples[min(k + 1, samples.count - 1)])
            return Int16(a + (b - a) * f)
        }
    }
}


/// A client that leaves out silence (and says so with `silence`) gets the finals of one that
/// sends everything: the same words, at times within one 10 ms frame.
@Suite struct SilenceSuppressionTests {
    static func session(_ engine: PocketSphinxEngine) -> LocalSession { LocalSession(engine: engine) }

    /// The finals of `samples` sent continuously, and with silence left out.
    static func both(_ samples: [Float]) throws -> (continuous: [RecognitionResult], suppressed: [RecognitionResult], silences: Double) {
        let (continuous, suppressed, declared) = try declaring(samples)
        return (continuous, suppressed, declared.reduce(0, +))
    }

    /// The same, with each silence declared.
    static func declaring(_ samples: [Float]) throws -> (continuous: [RecognitionResult], suppressed: [RecognitionResult], silences: [Double]) {
        let engine = try SharedEngine.get()
        let format = try AudioFormat(encoding: .pcmF32LE, sampleRate: 16000, channels: 1)
        func bytes(_ floats: [Float]) -> [UInt8] {
            floats.withUnsafeBytes { Array($0) }
        }
        let continuous = session(engine)
        continuous.start(format: format)
        var i = 0
        while i < samples.count {
            continuous.send(audio: bytes(Array(samples[i..<min(samples.count, i + 320)])))
            i += 320
        }
        continuous.end()

        let suppressed = session(engine)
        suppressed.start(format: format)
        var suppressor = SilenceSuppressor(sampleRate: 16000)
        var declared: [Double] = []
        func deliver(_ outputs: [SilenceSuppressor.Output]) {
            for output in outputs {
                switch output {
                case .audio(let floats):
                    var j = 0
                    while j < floats.count {
                        suppressed.send(audio: bytes(Array(floats[j..<min(floats.count, j + 320)])))
                        j += 320
                    }
                case .silence(let seconds):
                    declared.append(seconds)
                    suppressed.send(text: "{\"type\":\"silence\",\"duration\":\(seconds)}")
                }
            }
        }
        i = 0
        while i < samples.count {
            deliver(suppressor.push(Array(samples[i..<min(samples.count, i + 320)])))
            i += 320
        }
        deliver(suppressor.finish())
        suppressed.end()
        #expect(abs(suppressed.receivedSeconds - continuous.receivedSeconds) < 0.002, "the timeline is the whole input's")
        return (continuous.finals, suppressed.finals, declared)
    }

    static func expectSame(_ a: [RecognitionResult], _ b: [RecognitionResult], sourceLocation: SourceLocation = #_sourceLocation) {
        #expect(a.map(\.text) == b.map(\.text), sourceLocation: sourceLocation)
        for (x, y) in zip(a.flatMap(\.words), b.flatMap(\.words)) {
            #expect(abs(x.range.start - y.range.start) <= 0.0101 && abs(x.range.end - y.range.end) <= 0.0101,
                    "\(x.text): \(x.range) vs \(y.range)", sourceLocation: sourceLocation)
        }
    }

    @Test func speechWithLongPausesGivesTheSameFinalsWhenItsSilenceIsLeftOut() throws {
        // Five utterances with 3 s of quiet room noise between them.
        var samples: [Float] = []
        var noise = SplitNoise()
        for name in ["cards/001.wav", "cards/002.wav", "cards/003.wav", "cards/004.wav", "cards/005.wav"] {
            samples += try TestAudio.load(name).floats
            samples += (0..<48000).map { _ in noise.next() * 0.0005 }
        }
        let (continuous, suppressed, silences) = try Self.both(samples)
        #expect(silences > 5, "most of the 15 s of pauses was left out: \(silences) s")
        #expect(continuous.count >= 5)
        Self.expectSame(continuous, suppressed)
    }

    @Test func aLongPauseIsDeclaredAsItGoesAndStillGivesTheSameFinals() throws {
        // 12 s of quiet between two utterances: declared soon after it begins (0.1 s), then
        // every 5 s, then the rest when speech resumes; one silence on the server's timeline.
        var noise = SplitNoise()
        let quiet = (0..<(12 * 16000)).map { _ in noise.next() * 0.0005 }
        let samples = try TestAudio.load("cards/001.wav").floats + quiet + (try TestAudio.load("cards/002.wav").floats) + quiet.prefix(16000)
        let (continuous, suppressed, declared) = try Self.declaring(samples)
        #expect(declared.count >= 4, "\(declared)")
        #expect(abs(declared[0] - 0.1) < 1e-9, "\(declared)")
        #expect(declared.allSatisfy { $0 <= 5 + 1e-9 }, "\(declared)")
        #expect(declared.reduce(0, +) > 10)
        #expect(continuous.count >= 2)
        Self.expectSame(continuous, suppressed)
    }

    @Test func aRecordingWithShortPausesIsSentWhole() throws {
        let samples = try TestAudio.load("librivox/sense_and_sensibility_01_austen_64kb-0870.wav").floats
        let (continuous, suppressed, _) = try Self.both(samples)
        Self.expectSame(continuous, suppressed)
    }
}

/// Deterministic low-level noise in -1...1.
struct SplitNoise {
    var state: UInt64 = 0x9E37_79B9_7F4A_7C15
    mutating func next() -> Float {
        state = state &* 6364136223846793005 &+ 1442695040888963407
        return Float(Int64(bitPattern: state >> 11) % 2000 - 1000) / 1000
    }
}
