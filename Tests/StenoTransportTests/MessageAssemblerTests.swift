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

    @Test func resetForgetsAMessageInProgress() {
        var a = MessageAssembler(limit: 10)
        #expect(feed(&a, [1, 2], final: false) == .pending)
        a.reset()
        #expect(feed(&a, [3], binary: false, final: true) == .message(.text("\u{3}")))
    }
}
