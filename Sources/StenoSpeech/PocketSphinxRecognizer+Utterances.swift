// How an utterance of `PocketSphinxRecognizer` ends: closed by the detector, a cut or an
// end asked for (`closeUtterance`), in the middle of a block (`endSearchEarly`), by the
// search's early end (`endEarly`, Endpointing.swift), at a hole the client left
// (`skip`), or at the end of input; its final, its timing, and the decoder given back.

import StenoCore

extension PocketSphinxRecognizer {
    // MARK: - The end of an utterance

    /// Ends the utterance in progress, reports its final, gives the decoder back, and starts
    /// the next. `cut`: ended by max length, `endUtterance` or `finish` rather than by the
    /// detector.
    func closeUtterance(cut: Bool, into events: inout [TranscriberEvent]) throws(StenoError) {
        let stillSpeaking = frontEnd.inSpeech
        var last = CepstralFrames(length: frontEnd.cepstrumLength)
        frontEnd.endUtterance(into: &last)
        try endSearch(last: &last, cut: cut, stillSpeaking: stillSpeaking, into: &events)
        restartUtterance()
    }

    /// The detector switched to silence in the middle of a block (see `analyze`): the search
    /// ends and the final is made now; the front end and the utterance grid go on to the end of
    /// the block (`closedEarly`), where `search` restarts them as `closeUtterance` would have.
    /// No last frame: in silence the front end's `fe_end_utt` puts out none.
    func endSearchEarly(into events: inout [TranscriberEvent]) throws(StenoError) {
        var none = CepstralFrames(length: frontEnd.cepstrumLength)
        try endSearch(last: &none, cut: false, stillSpeaking: false, into: &events)
        closedEarly = true
        // Speech detected again before the block ends starts a decoder's utterance with no
        // block of its own before it.
        startedInSilence = true
    }

    /// The search's end of an utterance: its final (and what voice activity says), the
    /// decoder given back with the session's feature state taken out. `last`: the front end's
    /// last frame, if it made one.
    private func endSearch(last: inout CepstralFrames, cut: Bool, stillSpeaking: Bool,
                           into events: inout [TranscriberEvent]) throws(StenoError) {
        var stopwatch = UtteranceStopwatch()
        if utteranceHasSpeech, let decoder {
            mean = try decoder.endUtterance(last: &last)
            let searchSeconds = stopwatch.lap()
            let words = self.words(decoder, final: true)
            let wordsSeconds = stopwatch.lap()
            var result = Self.result(words)
            if let text = result?.text, alternativesLimit > 0 {
                result?.alternatives = alternatives(decoder, finalText: text)
            }
            // A wordless rest of an early-ended utterance leaves the early end's timing.
            if result != nil || !continuesEarlyEnd {
                lastUtteranceTiming = UtteranceTiming(
                    detectorDecidedAt: (cut ? earlyEndSample : silenceSample).map(seconds), closedAt: seconds(fed),
                    closeBegan: stopwatch.began, endSearchSeconds: searchSeconds, wordsSeconds: wordsSeconds,
                    alternativesSeconds: stopwatch.lap(), cpuSeconds: stopwatch.cpuSeconds)
            }
            if earlyEndSample != nil && !keepsDecoder && pool.hasLine {
                // The detector's wait goes on (`endEarly`), but others wait for a decoder: a
                // reader whose pauses are shorter than the detector's would keep it from them
                // utterance after utterance. It goes back, and the rest of the utterance
                // waits in line as a new one would, to go on as it would have here.
                self.decoder = nil
                pool.giveBack(decoder)
                startedInSilence = false
                yielded = true
            } else if earlyEndSample != nil {
                // It goes on searching the detector's wait (`endEarly`).
                try decoder.startUtterance(mean, startedInSilence: false)
                searchedFrames = 0
            } else {
                self.decoder = nil
                if keepsDecoder { kept = decoder } else { pool.giveBack(decoder) }
            }
            if let result {
                events.append(.final(result))
            } else if !volatileText.isEmpty {
                events.append(.volatile(RecognitionResult(range: TimeRange(start: seconds(fed), end: seconds(fed)), text: "")))
            }
            if speechActive {
                if earlyEndSample != nil {
                    // The search ended it in a pause (Endpointing.swift): speech ended with
                    // its words, and starts again with the next word heard (`resumeSpeech`).
                    speechActive = false
                    cutWhileSpeaking = nil
                    events.append(.speechEnded(at: result?.range.end ?? seconds(fed)))
                } else if stillSpeaking && cut {
                    cutWhileSpeaking = fed
                } else if !stillSpeaking {
                    // The detector switched to silence at `silenceFrame`, after
                    // `vad_postspeech` silent frames in a row: silence began with the first.
                    let switched = silenceFrame ?? frontEnd.lastFrame(afterSamples: fed - utteranceStart)
                    let quiet = max(firstFrame, switched - shape.postSpeechFrames + 1)
                    speechActive = false
                    cutWhileSpeaking = nil
                    events.append(.speechEnded(at: seconds(min(fed, frameStart(quiet)))))
                }
            }
        }
        utteranceHasSpeech = false
        silenceFrame = nil
        silenceSample = nil
        earlyEndSample = nil
        continuesEarlyEnd = false
        volatileText = ""
    }

    // MARK: - The search's early end (Endpointing.swift)

    /// The best path has been quiet long enough after its words (`endpointing`): they become
    /// final now, without waiting for the detector. The decoder, the front end and the
    /// utterance grid go on as they were, the decoder with a new utterance of its own, and the
    /// detector's wait is searched as before: so the session's cepstral mean takes in the same
    /// frames as when the detector ends the utterance (measured: a mean that skipped them
    /// changed later utterances' words), and speech heard again within the wait goes on in it.
    /// If the wait ends in silence, that utterance has no words and makes no final.
    func endEarly(_ decoder: PocketSphinxDecoder, into events: inout [TranscriberEvent]) throws(StenoError) {
        earlyEndSample = fed
        let searched = searchedFrames
        var none = CepstralFrames(length: frontEnd.cepstrumLength)
        try endSearch(last: &none, cut: true, stillSpeaking: true, into: &events)
        // The rest of the utterance, on the same grid, from the next frame the front end makes.
        utteranceHasSpeech = true
        continuesEarlyEnd = true
        firstFrame += searched
    }

    /// A word heard in the detector's wait after an early end: speech has started again, with it.
    func resumeSpeech(_ decoder: PocketSphinxDecoder, into events: inout [TranscriberEvent]) {
        guard let first = words(decoder, final: false).first else { return }
        speechActive = true
        events.append(.speechStarted(at: first.range.start))
    }

    /// A new utterance on a new grid from here (`fed`): the front end restarts.
    func restartUtterance() {
        closedEarly = false
        utteranceStart = fed
        firstFrame = 0
        awaitingFirstBlock = true
        startedInSilence = false
        blockOrigin = fed
        blockLength = blockSamples
        frontEnd.startUtterance()
    }

    /// Moves past a hole of `length` samples (the client's silence; nothing of the utterance
    /// before it has speech): the front end starts again after it on the frame grid of the
    /// utterance's block grid (dropping the first samples after the hole up to that grid), and
    /// the next block ends where the whole input's would have.
    func skip(_ length: Int, into events: inout [TranscriberEvent]) {
        fed += length
        if speechActive {
            speechActive = false
            cutWhileSpeaking = nil
            events.append(.speechEnded(at: seconds(fed - length)))
        }
        let shift = shape.frameShift
        let restart = blockOrigin + (fed - blockOrigin + shift - 1) / shift * shift
        dropSamples = restart - fed
        var blockEnd = blockOrigin + (restart - blockOrigin + blockSamples - 1) / blockSamples * blockSamples
        if blockEnd == restart { blockEnd += blockSamples }
        blockLength = blockEnd - restart
        utteranceStart = restart
        silenceFrame = nil
        silenceSample = nil
        firstFrame = 0
        frontEnd.startUtterance()
    }

    /// End of input: speech still going on ends, and nothing more is taken.
    func finishSpeech(into events: inout [TranscriberEvent]) {
        if speechActive {
            speechActive = false
            events.append(.speechEnded(at: seconds(cutWhileSpeaking ?? fed)))
            cutWhileSpeaking = nil
        }
        release()
    }
}
