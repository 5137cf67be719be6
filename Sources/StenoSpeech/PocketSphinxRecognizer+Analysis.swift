// How `PocketSphinxRecognizer` analyzes its input: the loop over what it can do now
// (`run`), each block through the front end and then the search (`analyze`, `search`), the
// decoder it borrows for the utterance (`attach`), and where speech is detected.

import StenoCore

extension PocketSphinxRecognizer {
    // MARK: - Analysis

    /// Analyzes what it can: a block waiting for a decoder, then every complete block, then an
    /// end asked for. Stops when it must wait for a decoder.
    func run() throws(StenoError) -> [TranscriberEvent] {
        var events: [TranscriberEvent] = []
        do {
            if let block = suspended {
                guard try attach() else { return events }
                suspended = nil
                try search(block, into: &events)
            }
            while suspended == nil && !released {
                if yielded {
                    guard try attach() else { break }
                    yielded = false
                }
                let available = input.count - inputHead
                let head = inputBase + inputHead
                let untilHole = holes.first.map { $0.position - head } ?? Int.max
                if dropSamples > 0 && available > 0 && untilHole > 0 {
                    let drop = min(dropSamples, available, untilHole)
                    inputHead += drop
                    fed += drop
                    dropSamples -= drop
                } else if let hole = holes.first, untilHole <= available, untilHole < blockLength {
                    // Everything before the hole is here, and less than a block.
                    if untilHole > 0 && utteranceHasSpeech {
                        try analyze(samples: untilHole, end: .silence, into: &events)
                    } else {
                        inputHead += untilHole
                        fed += untilHole
                        holes.removeFirst()
                        skip(hole.length, into: &events)
                    }
                } else if available >= blockLength && untilHole >= blockLength {
                    try analyze(samples: blockLength, end: nil, into: &events)
                } else if let end = pendingEnd, holes.isEmpty {
                    try analyze(samples: available, end: end, into: &events)
                } else {
                    break
                }
            }
        } catch {
            // pocketsphinx failed: the decoder is not reused, and later calls report it again.
            failure = error
            if let decoder {
                self.decoder = nil
                pool.discard(decoder)
            }
            pool.withdraw(waiter)
            throw error
        }
        compactInput()
        return events
    }

    /// The front end's part of a block of `samples` (complete, or the last one of an `end`);
    /// then the search's, if it has speech and a decoder can be had.
    ///
    /// When the detector switches to silence in the middle of the block, the utterance's search
    /// ends there and its final is made at once (`endSearchEarly`), rather than at the end of
    /// the block where `ps_process_raw`'s loop looks: the CLI's decoder is given no frame after
    /// the switch either (the detector puts out none in silence), so the final is the same. The
    /// rest of the block goes through the front end as before, and the utterance grid restarts
    /// at the block's end, as the CLI's does, so the next utterance is the CLI's too. Only if
    /// speech is detected again before the block ends (`vad_startspeech` frames in what is
    /// left of it) does this differ: the CLI goes on with one utterance, here a new one starts.
    private func analyze(samples count: Int, end: End?, into events: inout [TranscriberEvent]) throws(StenoError) {
        var frames = CepstralFrames(length: frontEnd.cepstrumLength)
        let endsEarly = end == nil && utteranceHasSpeech && decoder != nil
        var stopped = false
        let used = input.withUnsafeBufferPointer { buffer -> Int in
            guard count > 0, let base = buffer.baseAddress else { return 0 }
            return frontEnd.process(base + inputHead, count: count, into: &frames) { frame, inSpeech in
                if inSpeech {
                    if !utteranceHasSpeech { speechDetected(atFrame: frame, into: &events) }
                    return false
                }
                silenceFrame = frame
                silenceSample = utteranceStart + frontEnd.utteranceSamples
                stopped = endsEarly
                return stopped
            }
        }
        inputHead += used
        if stopped, let decoder {
            if !frames.isEmpty { try decoder.searchBlock(&frames) }
            searchedFrames += frames.count
            fed += used
            try endSearchEarly(into: &events)
            try analyzeRest(samples: count - used, end: end, into: &events)
        } else {
            try finishAnalysis(frames: frames, samples: count, end: end, into: &events)
        }
    }

    /// What is left of a block after an early end (see `analyze`): the front end goes on with
    /// it, and speech detected again starts a new utterance on the same grid.
    private func analyzeRest(samples count: Int, end: End?, into events: inout [TranscriberEvent]) throws(StenoError) {
        var frames = CepstralFrames(length: frontEnd.cepstrumLength)
        input.withUnsafeBufferPointer { buffer in
            guard let base = buffer.baseAddress else { return }
            frontEnd.process(base + inputHead, count: count, into: &frames) { frame, inSpeech in
                if inSpeech {
                    if !utteranceHasSpeech { speechDetected(atFrame: frame, into: &events) }
                } else {
                    silenceFrame = frame
                    silenceSample = utteranceStart + frontEnd.utteranceSamples
                }
                return false
            }
        }
        inputHead += count
        try finishAnalysis(frames: frames, samples: count, end: end, into: &events)
    }

    /// The rest of `analyze`: the block's frames to the search (with a decoder, if they need one).
    private func finishAnalysis(frames: CepstralFrames, samples count: Int, end: End?,
                                into events: inout [TranscriberEvent]) throws(StenoError) {
        blockLength = blockSamples
        if awaitingFirstBlock {
            awaitingFirstBlock = false
            startedInSilence = frames.isEmpty
        }
        let block = Block(frames: frames, samples: count, end: end)
        if !frames.isEmpty || (end != nil && utteranceHasSpeech) {
            guard try attach() else {
                suspended = block
                return
            }
        }
        try search(block, into: &events)
    }

    /// The search's part of a block, and what follows it: the end of the utterance, a
    /// volatile result, or a cut at the maximum length.
    private func search(_ block: Block, into events: inout [TranscriberEvent]) throws(StenoError) {
        var frames = block.frames
        if let decoder, !frames.isEmpty {
            try decoder.searchBlock(&frames)
            searchedFrames += frames.count
        }
        fed += block.samples
        if closedEarly && !utteranceHasSpeech {
            // The block whose detector ended the utterance early is over: as at the end of
            // any utterance, the front end ends (in silence it makes no frame) and restarts.
            var none = CepstralFrames(length: frontEnd.cepstrumLength)
            frontEnd.endUtterance(into: &none)
            restartUtterance()
        }
        closedEarly = false
        if block.end == .silence {
            try closeUtterance(cut: false, into: &events)
            if speechActive {
                // Speech ended where the client's silence began.
                speechActive = false
                cutWhileSpeaking = nil
                events.append(.speechEnded(at: seconds(fed)))
            }
            return
        }
        if let end = block.end {
            try closeUtterance(cut: true, into: &events)
            pendingEnd = nil
            if end == .finish { finishSpeech(into: &events) }
            return
        }
        if utteranceHasSpeech && !frontEnd.inSpeech {
            try closeUtterance(cut: false, into: &events)
        } else if utteranceHasSpeech {
            if fed - frameStart(firstFrame) >= maxUtteranceSamples {
                try closeUtterance(cut: true, into: &events)
            } else if let decoder, endpointing.endsNow(decoder) {
                try endEarly(decoder, into: &events)
            } else if let decoder {
                if continuesEarlyEnd && !speechActive { resumeSpeech(decoder, into: &events) }
                if volatileResults { reportVolatile(decoder, into: &events) }
            }
        }
        if let cut = cutWhileSpeaking, !utteranceHasSpeech, fed - cut >= shape.postSpeechFrames * shape.frameShift {
            cutWhileSpeaking = nil
            speechActive = false
            events.append(.speechEnded(at: seconds(cut)))
        }
    }

    /// A decoder for the utterance: the one it has, one granted while it waited, or an idle
    /// one. False when none is free (the recognizer is then in the pool's line).
    private func attach() throws(StenoError) -> Bool {
        if decoder != nil { return true }
        let got: PocketSphinxDecoder
        if let kept {
            got = kept
            self.kept = nil
        } else if let granted = waiter.take() {
            got = try granted.get()
        } else if let idle = pool.take(for: waiter, vocabulary: vocabulary) {
            got = idle
        } else {
            return false
        }
        decoder = got
        try got.use(vocabulary)
        try got.startUtterance(mean, startedInSilence: startedInSilence)
        searchedFrames = 0
        return true
    }

    /// The detector has switched to speech at `triggerFrame` (utterance grid).
    private func speechDetected(atFrame triggerFrame: Int, into events: inout [TranscriberEvent]) {
        firstFrame = max(0, triggerFrame - shape.preSpeechFrames)
        utteranceHasSpeech = true
        cutWhileSpeaking = nil
        if !speechActive {
            speechActive = true
            // Speech began with the first of the `vad_startspeech` speech frames in a row.
            let onset = max(0, triggerFrame - shape.startSpeechFrames + 1)
            events.append(.speechStarted(at: seconds(frameStart(onset))))
        }
    }

    private func compactInput() {
        if inputHead > 0 && inputHead * 2 >= input.count {
            input.removeFirst(inputHead)
            inputBase += inputHead
            inputHead = 0
        }
    }
}
