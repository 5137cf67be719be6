import StenoCore
import StenoSystem
import Testing
@testable import StenoSpeech

/// Many sessions on one engine's shared decoders, as a server's lanes run them.
struct Interleaving {
    /// Every session's events, in order.
    var events: [[TranscriberEvent]]
    /// How many times a session found no decoder free and had to wait.
    var waits: Int
}

/// Runs each file through its own recognizer of `engine` (with `options[i]`, default ones when
/// there are fewer), 0.1 s at a time in turn, as a server's lanes would; a recognizer that
/// waits for a decoder gets nothing until it is woken. `staggered`: session i joins at round
/// 3i, so that sessions start and end at different times.
func interleave(_ files: [TestAudio], options: [RecognizerOptions] = [], on engine: PocketSphinxEngine,
                staggered: Bool = false) throws -> Interleaving {
    final class Flag: Sendable {
        let raised = Locked(false)
    }
    let woken = files.map { _ in Flag() }
    let recognizers = try files.indices.map { i in
        try engine.makePocketSphinxRecognizer(options: i < options.count ? options[i] : RecognizerOptions(),
                                              wake: { woken[i].raised.withLock { $0 = true } })
    }
    var run = Interleaving(events: files.map { _ in [] }, waits: 0)
    var offsets = files.map { _ in 0 }
    var done = files.map { _ in false }
    var finishing = files.map { _ in false }
    var round = 0
    while done.contains(false) && round < 100_000 {
        round += 1
        for i in files.indices where !done[i] && (!staggered || round > i * 3) {
            let r = recognizers[i]
            if r.isWaiting {
                guard woken[i].raised.withLock({ value in defer { value = false }; return value }) else { continue }
                run.events[i] += try r.proceed()
                if finishing[i] && !r.isWaiting { done[i] = true }
                continue
            }
            let samples = files[i].floats
            if offsets[i] < samples.count {
                let next = min(samples.count, offsets[i] + 1600)
                run.events[i] += try r.accept(Array(samples[offsets[i]..<next]))
                offsets[i] = next
                if r.isWaiting { run.waits += 1 }
            } else {
                finishing[i] = true
                run.events[i] += try r.finish()
                if r.isWaiting { run.waits += 1 } else { done[i] = true }
            }
        }
    }
    #expect(round < 100_000, "the sessions got stuck")
    return run
}
