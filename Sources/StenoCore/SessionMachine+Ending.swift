// How a `SessionMachine`'s requests and the session itself end: a finalize completed, the
// end completed (`ended`, the reason's error, or a quiet close when abandoned), the message
// for each reason, and winding down on the server's initiative.

extension SessionMachine {
    // MARK: Ending

    mutating func completeFinalize(into out: inout [SessionAction]) {
        guard isStarted, !pendingFinalizes.isEmpty else { return }
        let through = pendingFinalizes.removeFirst()
        for event in assembler.clearVolatile(before: through) { emit(event, into: &out) }
        emit(.finalized(through: through), into: &out)
    }

    mutating func completeEnd(into out: inout [SessionAction]) {
        guard case .ending(let reason) = stage else { return }
        // End implies every earlier finalize is done too.
        while !pendingFinalizes.isEmpty { completeFinalize(into: &out) }
        for event in assembler.clearVolatile() { emit(event, into: &out) }
        if reason == .abandoned {
            // Nobody to tell: the finals went to the channel, if any.
            detachedSince = nil
            stage = .closed(.disconnected)
        } else if let code = reason.errorCode {
            stage = .closed(.failed(code))
            emit(.error(StenoError(code, endMessage(reason))), into: &out)
            closeConnection(into: &out)
        } else {
            stage = .closed(.ended)
            emit(.ended(duration: receivedSeconds), into: &out)
            closeConnection(into: &out)
        }
    }

    private func endMessage(_ reason: EndReason) -> String {
        let limits = configuration.limits
        switch reason {
        case .requested: return "ended"
        case .sessionLimit: return "the session reached its maximum duration of \(seconds(limits.maxSessionSeconds)) s"
        case .idle: return "no audio and no message for \(seconds(limits.idleTimeoutSeconds)) s"
        case .shuttingDown: return Self.shutdownMessage
        case .abandoned: return "the connection dropped and was not resumed"
        }
    }

    func seconds(_ value: Double) -> String { JSONWriter.secondsText(value) }

    /// Ends input on the server's initiative: finalize, then close with the reason's error.
    mutating func windDown(_ reason: EndReason, into out: inout [SessionAction]) {
        stage = .ending(reason)
        out.append(.submitEnd)
    }
}
