import Foundation
import StenoCore
import Testing
@testable import StenoTransport
import StenoTestSupport

/// The memory of messages still being assembled, bounded per address and in all: the
/// bookkeeping in memory, then a real transport closing with 1013 past the budget.
@Suite struct MessageBudgetTests {
    @Test func piecesAreAllowedWithinBothBudgetsAndExemptAddressesAreNotCounted() {
        var budget = MessageBudget(total: 100, perAddress: 60, exempt: ["10.0.0.9"])
        #expect(budget.allows(60, from: "10.0.0.1"))
        budget.change(60, for: "10.0.0.1")
        #expect(!budget.allows(1, from: "10.0.0.1"))
        #expect(budget.allows(40, from: "10.0.0.2"))
        #expect(!budget.allows(41, from: "10.0.0.2"))
        #expect(budget.allows(1_000, from: "10.0.0.9"))
        budget.change(1_000, for: "10.0.0.9")
        #expect(budget.held == 60)
        budget.change(-60, for: "10.0.0.1")
        #expect(budget.held == 0)
        #expect(budget.allows(60, from: "10.0.0.1"))
        #expect(budget.allows(0, from: "10.0.0.1"))
    }

    @Test func theAssemblerSaysWhatAPieceWouldAdd() {
        var assembler = MessageAssembler(limit: 100)
        #expect(assembler.growth(50, final: true, remaining: 0) == 0)  // whole in one piece
        #expect(assembler.growth(50, final: false, remaining: 0) == 50)
        _ = [UInt8](repeating: 1, count: 50).withUnsafeBytes { assembler.receive($0, binary: true, final: false) }
        #expect(assembler.buffered == 50)
        #expect(assembler.growth(30, final: false, remaining: 0) == 30)
        #expect(assembler.growth(30, final: false, remaining: 40) == 0)  // too large: dropped
        #expect(assembler.growth(30, final: true, remaining: 0) == 0)    // the last piece
    }

    @Test func aPiecePastTheAddressBudgetClosesItsConnection1013AndTheOtherGoesOn() throws {
        let server = try TestServer { $0.unfinishedMessagesPerAddress = 100_000 }
        let (a, _) = try server.connect(source: "127.0.0.2")
        let (b, _) = try server.connect(source: "127.0.0.2")
        try a.sendFrame(.binary, [UInt8](repeating: 1, count: 60_000), fin: false)
        // A ping after the fragment: its pong says the fragment has been read.
        try a.sendPing([7])
        #expect(try a.receive() == .pong([7]))
        try b.sendFrame(.binary, [UInt8](repeating: 2, count: 60_000), fin: false)
        let (_, close) = try b.receiveUntilClose()
        guard case .close(let code, _)? = close else {
            Issue.record("no close frame: \(String(describing: close))")
            return
        }
        #expect(code == 1013)
        // The first connection's message completes and is echoed whole.
        try a.sendFrame(.continuation, [UInt8](repeating: 3, count: 1_000), fin: true)
        #expect(try a.receive() == .binary([UInt8](repeating: 1, count: 60_000) + [UInt8](repeating: 3, count: 1_000)))
        // Its memory is free again: another connection from the address may hold as much.
        let (c, _) = try server.connect(source: "127.0.0.2")
        try c.sendFrame(.binary, [UInt8](repeating: 4, count: 60_000), fin: false)
        try c.sendPing([8])
        #expect(try c.receive() == .pong([8]))
    }
}
