import Foundation
import StenoCore
import StenoSystem
import Testing
@testable import StenoSpeech

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
