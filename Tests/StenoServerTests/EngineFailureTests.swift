import StenoCore
import Testing
@testable import StenoServer

/// An engine that fails in the middle of a session ends that session alone: with `internal`
/// (1011) after the finals it had made, while the server goes on serving everyone else.
@Suite struct EngineFailureTests {
    typealias S = SessionServiceTests

    @Test func aRecognizerThatBreaksEndsItsSessionAfterItsFinalsAndNoOtherOne() throws {
        let server = S.server()
        let before = try S.started(server)
        server.engine.failsAfterBlocks.withLock { $0 = 6 }
        let broken = try S.started(server)
        server.engine.failsAfterBlocks.withLock { $0 = nil }
        let after = try S.started(server)
        // An utterance made final, then the engine breaks in the next one.
        server.send(broken, audio: S.speech(2) + S.silence(1))
        server.settle()
        #expect(S.finals(server.events(broken)).map(\.text) == ["w1 w2"])
        server.send(broken, audio: S.speech(4))
        server.settle()
        S.expectFatal(server, broken, "internal", close: 1011)
        #expect(S.kinds(server.events(broken)) == ["ready", "final", "error"])
        #expect(server.metrics.errors.labels("internal").value == 1)
        // The others, one started before and one after, are served as if nothing happened.
        S.expectItWorks(server, before, "the session started before")
        S.expectItWorks(server, after, "the session started after")
        S.expectItWorks(server, try S.started(server), "a new session")
    }
}
