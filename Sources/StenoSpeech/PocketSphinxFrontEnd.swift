import CPocketSphinx
import StenoCore

/// One session's own pocketsphinx front end (sphinxbase's `fe_t`, made with the decoders'
/// configuration): pre-emphasis, noise removal, MFCC and the voice activity detector. It is the
/// per-stream state of recognition that must carry on between utterances (the noise estimates,
/// the detector's state), and it is small (≈20 kB), so every session keeps its own and a
/// decoder is only lent while there is speech to search.
///
/// It is fed a frame shift at a time, so it can tell the exact frame where voice activity
/// changed; the cepstra it puts out (those of speech, and of the pre-speech frames when speech
/// starts) are exactly what a decoder's own front end would have made of the same samples, in
/// the same order, however the samples are cut (measured: the same words, frames and scores as
/// `ps_process_raw` on the test sets).
///
/// Frames are numbered on the utterance's grid: the front end drops its overlap buffer when an
/// utterance starts, so frame `k` covers samples `start + k·shift ..< start + k·shift + size`
/// of an utterance that started at sample `start`.
final class SpeechFrontEnd {
    private let fe: OpaquePointer
    let frameShift: Int
    let frameSize: Int
    /// Floats per cepstral frame (13).
    let cepstrumLength: Int
    private let rows: Int
    private let cepstra: UnsafeMutablePointer<mfcc_t>
    private let rowPointers: UnsafeMutablePointer<UnsafeMutablePointer<mfcc_t>?>

    /// Samples given since the utterance started.
    private(set) var utteranceSamples = 0
    /// The detector's state after the last sample given.
    private(set) var inSpeech = false

    init(config: OpaquePointer) throws(StenoError) {
        guard let fe = fe_init_auto_r(config) else {
            throw StenoError(.internal, "pocketsphinx front end could not be made")
        }
        var shift: Int32 = 0
        var size: Int32 = 0
        fe_get_input_size(fe, &shift, &size)
        let length = Int(fe_get_output_size(fe))
        guard shift > 0, size >= shift, length > 0 else {
            fe_free(fe)
            throw StenoError(.internal, "pocketsphinx front end has frame shift \(shift), size \(size)")
        }
        self.fe = fe
        self.frameShift = Int(shift)
        self.frameSize = Int(size)
        self.cepstrumLength = length
        // Room for the pre-speech buffer flushed at once when speech starts, and more: a frame
        // shift of samples makes at most one new frame besides it, so nothing is left behind.
        self.rows = max(64, 2 * Int(max(0, cmd_ln_int_r(config, "-vad_prespeech"))) + 8)
        self.cepstra = .allocate(capacity: rows * length)
        cepstra.initialize(repeating: 0, count: rows * length)
        self.rowPointers = .allocate(capacity: rows)
        for row in 0..<rows {
            rowPointers[row] = cepstra + row * length
        }
    }

    deinit {
        // fe_free releases the configuration, whose reference count is not atomic and is
        // shared with the engine's: under the lock that guards all of them.
        PocketSphinxDecoder.lifecycleLock.lock()
        fe_free(fe)
        PocketSphinxDecoder.lifecycleLock.unlock()
        cepstra.deallocate()
        rowPointers.deallocate()
    }

    /// A new stream: noise estimates and sample counter restart (`ps_start_stream`'s part).
    func startStream() {
        fe_start_stream(fe)
        startUtterance()
    }

    /// A new utterance: overlap buffer, pre-emphasis and detector restart (`ps_start_utt`'s part).
    func startUtterance() {
        fe_start_utt(fe)
        utteranceSamples = 0
        inSpeech = false
    }

    /// Ends the utterance (`ps_end_utt`'s part): the frame made of the samples left in the
    /// overlap buffer, appended to `frames` if the detector is in speech.
    func endUtterance(into frames: inout CepstralFrames) {
        var count: Int32 = 0
        fe_end_utt(fe, cepstra, &count)
        if count > 0 {
            frames.append(UnsafeBufferPointer(start: cepstra, count: cepstrumLength))
        }
        inSpeech = fe_get_vad_state(fe) != 0
    }

    /// The last complete frame after `samples` samples of the utterance (-1 before the first).
    func lastFrame(afterSamples samples: Int) -> Int {
        samples >= frameSize ? (samples - frameSize) / frameShift : -1
    }

    /// Feeds samples a frame shift at a time; appends the cepstra the front end puts out to
    /// `frames`, and calls `changed(frame, inSpeech)` for every change of voice activity, with
    /// the utterance-grid frame where it happened. `changed` returns true to stop right there
    /// (the rest is left for a later call); returns how many samples were fed.
    @discardableResult
    func process(_ samples: UnsafePointer<Int16>, count: Int, into frames: inout CepstralFrames,
                 changed: (Int, Bool) -> Bool) -> Int {
        var offset = 0
        while offset < count {
            let piece = min(frameShift, count - offset)
            feed(samples + offset, count: piece, into: &frames)
            offset += piece
            utteranceSamples += piece
            let now = fe_get_vad_state(fe) != 0
            if now != inSpeech {
                inSpeech = now
                if changed(lastFrame(afterSamples: utteranceSamples), now) { break }
            }
        }
        return offset
    }

    private func feed(_ samples: UnsafePointer<Int16>, count: Int, into frames: inout CepstralFrames) {
        var input: UnsafePointer<Int16>? = samples
        var remaining = count
        while remaining > 0 {
            var made = Int32(rows)
            let before = remaining
            if fe_process_frames(fe, &input, &remaining, rowPointers, &made, nil) < 0 { return }
            if made > 0 {
                frames.append(UnsafeBufferPointer(start: cepstra, count: Int(made) * cepstrumLength))
            }
            if remaining == before && made == 0 { return }  // no progress: never spin
        }
    }
}

/// Cepstral frames in one flat buffer (`length` floats each), as the front end puts them out.
struct CepstralFrames {
    let length: Int
    private(set) var values: [mfcc_t] = []

    init(length: Int) {
        self.length = length
    }

    var count: Int { values.count / length }
    var isEmpty: Bool { values.isEmpty }

    mutating func append(_ floats: UnsafeBufferPointer<mfcc_t>) {
        values.append(contentsOf: floats)
    }

    mutating func append(contentsOf other: CepstralFrames) {
        values.append(contentsOf: other.values)
    }

    mutating func removeAll() {
        values.removeAll(keepingCapacity: true)
    }

    /// Calls `body` with row pointers (`mfcc_t **`) to frames `from ..< from + count`, which it
    /// may change in place. False for frames it does not have.
    mutating func withRows(from: Int, count: Int, _ body: (UnsafeMutablePointer<UnsafeMutablePointer<mfcc_t>?>) -> Bool) -> Bool {
        guard from >= 0, count > 0, from + count <= self.count else { return false }
        let length = self.length
        return values.withUnsafeMutableBufferPointer { buffer -> Bool in
            guard let base = buffer.baseAddress else { return false }
            let rows = UnsafeMutablePointer<UnsafeMutablePointer<mfcc_t>?>.allocate(capacity: count)
            defer { rows.deallocate() }
            for row in 0..<count { rows[row] = base + (from + row) * length }
            return body(rows)
        }
    }
}
