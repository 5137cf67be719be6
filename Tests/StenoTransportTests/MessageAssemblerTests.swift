import Testing
@testable import StenoTransport

/// The joining of message pieces and the size limit, without sockets.
@Suite struct MessageAssemblerTests {
    func feed(_ assembler: inout MessageAssembler, _ bytes: [UInt8], binary: Bool = true, final: Bool) -> MessageAssembler.Outcome {
        bytes.withUnsafeBytes { assembler.receive($0, binary: binary, final: final) }
    }

    @Test func aWholeMessageInOnePieceIsDeliveredAsItIs() {
        var a = MessageAssembler(limit: 8)
        #expect(feed(&a, [1, 2, 3], final: true) == .message(.binary([1, 2, 3])))
        #expect(feed(&a, Array("héllo".utf8), binary: false, final: true) == .message(.text("héllo")))
        #expect(feed(&a, [], binary: false, final: true) == .message(.text("")))
        #expect(feed(&a, Array(repeating: 9, count: 8), final: true) == .message(.binary(Array(repeating: 9, count: 8))))
    }

    @Test func piecesAreJoinedAndTheTypeIsTheFirstPieces() {
        var a = MessageAssembler(limit: 100)
        #expect(feed(&a, Array("ab".utf8), binary: false, final: false) == .pending)
        // libwebsockets reports continuation pieces as whatever; the message keeps its type.
        #expect(feed(&a, Array("cd".utf8), binary: true, final: false) == .pending)
        #expect(feed(&a, Array("e".utf8), binary: true, final: true) == .message(.text("abcde")))
        #expect(feed(&a, [1], final: true) == .message(.binary([1])), "the next message starts afresh")
    }

    @Test func overTheLimitIsReportedOnceAndTheRestOfTheMessageIsDropped() {
        var a = MessageAssembler(limit: 4)
        #expect(feed(&a, [1, 2, 3], final: false) == .pending)
        #expect(feed(&a, [4, 5], final: false) == .tooLarge)
        #expect(feed(&a, [6, 7], final: false) == .pending)
        #expect(feed(&a, [8], final: true) == .pending, "nothing of it is delivered")
        #expect(feed(&a, [1, 2], final: true) == .message(.binary([1, 2])))
        // A single piece over the limit.
        #expect(feed(&a, [1, 2, 3, 4, 5], final: true) == .tooLarge)
        #expect(feed(&a, [1, 2, 3, 4], final: true) == .message(.binary([1, 2, 3, 4])))
    }

    /// A frame's header alone (lws calls nothing before its payload) is judged by the length
    /// it announces: too large once, and its payload is dropped when it comes.
    @Test func aHeaderAnnouncingTooMuchIsTooLargeBeforeItsPayload() {
        var a = MessageAssembler(limit: 1000)
        #expect(a.announced(1000) == .pending, "it fits")
        #expect(a.announced(1 << 32) == .tooLarge)
        #expect(a.announced(1 << 32) == .pending, "reported once")
        #expect(feed(&a, [1, 2], final: false) == .pending)
        #expect(feed(&a, [3], final: true) == .pending, "nothing of it is delivered")
        #expect(feed(&a, [4], final: true) == .message(.binary([4])), "the next message starts afresh")
        // With a message in progress the announced part counts with what is held.
        #expect(feed(&a, Array(repeating: 1, count: 900), final: false) == .pending)
        #expect(a.announced(100) == .pending, "≤ 125 bytes may be a ping's between fragments")
        #expect(a.announced(200) == .tooLarge)
        #expect(a.buffered == 0, "what was held is let go")
    }

    @Test func resetForgetsAMessageInProgress() {
        var a = MessageAssembler(limit: 10)
        #expect(feed(&a, [1, 2], final: false) == .pending)
        a.reset()
        #expect(feed(&a, [3], binary: false, final: true) == .message(.text("\u{3}")))
    }
}
