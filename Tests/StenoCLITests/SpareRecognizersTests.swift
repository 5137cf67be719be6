import Foundation
import StenoCore
import StenoTestSupport
import Testing

/// `steno serve --spare-recognizers N`: N shared decoders made at start, another whenever one is
/// lent, the rest only when speech needs them (its memory follows the utterances recognized at
/// once, not `--recognizers`).
@Suite struct SpareRecognizersTests {
    static func made(_ instance: ServeInstance) throws -> Int? {
        let text = try HTTPTestClient.get(port: instance.port, "/metrics").bodyText
        let line = text.split(separator: "\n").first { $0.hasPrefix("steno_recognizers_made ") }
        return line.flatMap { Double($0.split(separator: " ").last ?? "").map { Int($0) } }
    }

    static func eventually(_ instance: ServeInstance, made expected: Int) throws -> Bool {
        for _ in 0..<300 {
            if try made(instance) == expected { return true }
            usleep(100_000)
        }
        return false
    }

    @Test func oneSpareAtStartAndAnotherMadeWhenItIsLent() throws {
        let instance = try ServeInstance(["--recognizers", "4", "--spare-recognizers", "1"])
        defer { instance.stop() }
        let atStart = try Self.eventually(instance, made: 1)
        #expect(atStart, "\((try? Self.made(instance)) ?? -1) made at start")
        let send = try StenoCommand.run(["send", TestAudio.clip, "--server", "ws://127.0.0.1:\(instance.port)", "--fast", "--encoding", "pcm"])
        #expect(send.status == 0, "\(send.stderr)")
        #expect(send.stdout == (try TestAudio.transcribed(TestAudio.clip, endpointing: ServeInstance.endpointing)))
        // The talker took the spare; another was made for the next, and both are kept.
        let afterOne = try Self.eventually(instance, made: 2)
        #expect(afterOne, "\((try? Self.made(instance)) ?? -1) made after one talker")
    }
}
