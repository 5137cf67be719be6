import StenoCore
import Testing
@testable import StenoSpeech

/// What a model set says of its engines' worker processes (`/metrics`), without a model.
@Suite struct ModelSetWorkerTests {
    /// An engine that makes no recognizer: only its worker's figures count here.
    struct Worker: SpeechEngine {
        let info: SpeechEngineInfo
        let workerStats: EngineWorkerStats?

        init(_ model: String, _ stats: EngineWorkerStats?) {
            info = SpeechEngineInfo(name: "worker", version: "0", model: model, language: "en-US", sampleRate: 16_000)
            workerStats = stats
        }

        func makeRecognizer(options: RecognizerOptions, wake: @escaping @Sendable () -> Void) throws(StenoError) -> any SpeechRecognizer {
            throw StenoError(.internal, "no recognizers here")
        }
    }

    /// One worker is shown as it is; two add up (ready only while both are); none is no worker.
    @Test func everyEnginesWorkerCounts() {
        let first = EngineWorkerStats(ready: true, restarts: 1, pending: 3, cpuSeconds: 2.5)
        let second = EngineWorkerStats(ready: false, restarts: 2, pending: 4, cpuSeconds: 1)
        #expect(ModelSet([Worker("a", nil), Worker("b", first)]).workerStats == first)
        #expect(ModelSet([Worker("a", first), Worker("b", nil), Worker("c", second)]).workerStats
                == EngineWorkerStats(ready: false, restarts: 3, pending: 7, cpuSeconds: 3.5))
        #expect(ModelSet([Worker("a", first), Worker("c", first)]).workerStats?.ready == true)
        #expect(ModelSet([Worker("a", nil), Worker("b", nil)]).workerStats == nil)
    }
}
