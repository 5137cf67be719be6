import Foundation
import Testing
@testable import StenoServer

extension MemoryServer {
    /// Expects the next session refused for load: a 503 `busy` with `Retry-After`, the one
    /// handshake refused as `overload` so far, and admission saying busy. `admitted` is what an
    /// admission would mean. False (recorded) if it was admitted: the caller stops there.
    @discardableResult
    func expectBusyRefusal(_ admitted: Comment, sourceLocation: SourceLocation = #_sourceLocation) -> Bool {
        let (refused, none) = connect()
        #expect(none == nil, sourceLocation: sourceLocation)
        guard case .reject(let response) = refused else {
            Issue.record(admitted, sourceLocation: sourceLocation)
            return false
        }
        #expect(response.status == 503, sourceLocation: sourceLocation)
        #expect(String(decoding: response.body, as: UTF8.self).contains(#""status":"busy""#), sourceLocation: sourceLocation)
        #expect(response.headers.contains { $0.name == "Retry-After" }, sourceLocation: sourceLocation)
        #expect(metrics.handshakesRefused.labels("overload").value == 1, sourceLocation: sourceLocation)
        #expect(metrics.admissionBusy.value == 1, sourceLocation: sourceLocation)
        return true
    }
}
