// How `SessionMachine` takes audio and analysis: a binary frame on the session timeline, PCM
// or Opus (`receiveAudio`), the pipeline's results and how far analysis has got
// (`receiveResults`), and inbound backpressure (`regulateReading`).

extension SessionMachine {
    // MARK: Audio and analysis

    mutating func receiveAudio(_ bytes: [UInt8], now: Double, into out: inout [SessionAction]) {
        lastActivity = max(lastActivity, now)
        let limit = configuration.limits.maxFrameBytes
        guard bytes.count <= limit else {
            fail(.tooLarge, "an audio frame of \(bytes.count) bytes is over the limit of \(limit) bytes", into: &out)
            return
        }
        guard let format = request?.audio else {
            fail(.notStarted, "audio before \"start\"; start must be the first message", into: &out)
            return
        }
        switch stage {
        case .open:
            break
        case .ending(.requested):
            if !warnedAudioAfterEnd {
                warnedAudioAfterEnd = true
                emit(.error(StenoError(.badMessage, "audio after \"end\" is ignored")), into: &out)
            }
            return
        case .awaitingStart, .ending, .closed:
            return
        }
        let start = Double(receivedUnits) / unitRate
        if let bytesPerFrame = format.bytesPerFrame {
            guard bytes.count % bytesPerFrame == 0 else {
                emit(.error(StenoError(.badAudio,
                    "a \(format.encoding.rawValue) frame must hold whole sample frames of \(bytesPerFrame) bytes; "
                    + "\(bytes.count) bytes dropped")), into: &out)
                return
            }
            let frames = bytes.count / bytesPerFrame
            guard frames > 0 else { return }
            receivedUnits += Int64(frames)
            out.append(.submitAudio(AudioChunk(bytes: bytes, start: start,
                                               duration: Double(frames) / unitRate, end: Double(receivedUnits) / unitRate)))
            regulateReading(now: now, into: &out)
        } else {
            let samples: Int
            let malformed: Bool
            if let good = OpusPacket.samples(bytes) {
                samples = good
                malformed = false
                lastOpusSamples = good
            } else {
                samples = lastOpusSamples
                malformed = true
            }
            receivedUnits += Int64(samples)
            out.append(.submitAudio(AudioChunk(bytes: bytes, start: start, duration: Double(samples) / unitRate,
                                               end: Double(receivedUnits) / unitRate, headerIsMalformed: malformed)))
            regulateReading(now: now, into: &out)
            if malformed {
                emit(.error(StenoError(.badAudio,
                    "an Opus packet of \(bytes.count) bytes has an unreadable header; concealed")), into: &out)
            }
        }
    }

    mutating func receiveResults(_ events: [TranscriberEvent], analyzedThrough: Double?, now: Double,
                                         into out: inout [SessionAction]) {
        guard isStarted else { return }
        for produced in assembler.consume(events) { emit(produced, into: &out) }
        // `infinity`: everything received (the pipeline has finished), as counted here.
        if let through = analyzedThrough, !through.isNaN {
            let clamped = min(through, Double(receivedUnits) / unitRate)
            if clamped > analyzed {
                analyzed = clamped
                lastActivity = max(lastActivity, now)
            }
        }
        regulateReading(now: now, into: &out)
    }

    /// Inbound backpressure: at `limits.bufferSeconds` of audio waiting for analysis the
    /// socket stops being read; it is read again once the backlog is down to half (so reading
    /// is not toggled on every frame). Audio that still arrives while paused (already in
    /// socket or library buffers) is accepted, never refused. While paused the client cannot
    /// be idle (what it sends waits unread, and the wait is the server's): the idle timeout
    /// counts again from the resume.
    mutating func regulateReading(now: Double, into out: inout [SessionAction]) {
        let highWater = max(0.1, configuration.limits.bufferSeconds)
        let backlog = backlogSeconds
        if !isReadingPaused && backlog >= highWater {
            isReadingPaused = true
            out.append(.pauseReading)
        } else if isReadingPaused && backlog <= highWater / 2 {
            isReadingPaused = false
            lastActivity = max(lastActivity, now)
            out.append(.resumeReading)
        }
    }
}
