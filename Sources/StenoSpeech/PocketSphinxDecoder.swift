import CPocketSphinx
import CPocketSphinxShims
import Foundation
import StenoCore

/// One pocketsphinx decoder (`ps_decoder_t`) and what the recognizer needs to know about it.
///
/// Ownership is exclusive: a decoder is either idle in its engine's pool or used by exactly
/// one recognizer, which is why it can be `@unchecked Sendable` (it moves between threads but
/// is never used by two at once).
final class PocketSphinxDecoder: @unchecked Sendable {
    let ps: OpaquePointer
    private let logmath: OpaquePointer
    /// Samples between frames (160 at 16 kHz, 100 frames/s).
    let frameShift: Int
    /// Samples in one analysis window (410: 25.6 ms).
    let frameSize: Int
    /// Voice activity: frames kept from before the start of speech (`-vad_prespeech`).
    let preSpeechFrames: Int
    /// Consecutive speech frames that start speech (`-vad_startspeech`).
    let startSpeechFrames: Int
    /// Consecutive silence frames that end speech (`-vad_postspeech`).
    let postSpeechFrames: Int

    /// A second front end fed the same samples a frame shift at a time: it tells the frames
    /// where speech starts and stops, which pocketsphinx does not report.
    let vad: FrontEndVAD
    /// The decoder's configuration after the model's feat.params were applied (retained).
    let config: OpaquePointer

    private let freshCMN: CMNState
    private(set) var utteranceStarted = false

    /// Process-wide: decoders are made and freed one at a time. ps_init writes sphinxbase
    /// globals (debug level, log callback users), and making decoders in parallel on two
    /// cores would gain nothing anyway.
    static let lifecycleLock = NSLock()
    private static let logSetup: Void = {
        steno_ps_install_log_callback()
        _ = steno_ps_set_log_file(nil)
    }()

    /// Makes a decoder from command-line style arguments. Blocking (≈0.5 s with en-us).
    init(arguments: [String]) throws(StenoError) {
        Self.lifecycleLock.lock()
        defer { Self.lifecycleLock.unlock() }
        _ = Self.logSetup
        steno_ps_clear_last_error()

        // cmd_ln_parse_r takes char *argv[]; the copies stay alive until it has parsed them
        // (this sphinxbase copies values it keeps).
        var argv: [UnsafeMutablePointer<CChar>?] = arguments.map { strdup($0) }
        defer { for pointer in argv { free(pointer) } }
        guard let config = argv.withUnsafeMutableBufferPointer({ buffer in
            cmd_ln_parse_r(nil, ps_args(), Int32(buffer.count), buffer.baseAddress, 1)
        }) else {
            throw StenoError(.internal, "pocketsphinx refused its arguments: \(Self.lastError(or: "bad arguments"))")
        }
        defer { cmd_ln_free_r(config) }  // ps_init keeps its own reference
        guard let ps = ps_init(config) else {
            throw StenoError(.internal, "pocketsphinx could not load its model: \(Self.lastError(or: "ps_init failed"))")
        }
        guard let logmath = ps_get_logmath(ps), let fe = ps_get_fe(ps),
              let feat = ps_get_feat(ps), let cmn = feat.pointee.cmn_struct,
              let decoderConfig = ps_get_config(ps)
        else {
            ps_free(ps)
            throw StenoError(.internal, "pocketsphinx decoder is missing its front end")
        }
        var shift: Int32 = 0
        var size: Int32 = 0
        fe_get_input_size(fe, &shift, &size)
        guard shift > 0, size >= shift else {
            ps_free(ps)
            throw StenoError(.internal, "pocketsphinx front end has frame shift \(shift), size \(size)")
        }
        self.ps = ps
        self.logmath = logmath
        self.frameShift = Int(shift)
        self.frameSize = Int(size)
        self.preSpeechFrames = max(0, cmd_ln_int_r(decoderConfig, "-vad_prespeech"))
        self.startSpeechFrames = max(1, cmd_ln_int_r(decoderConfig, "-vad_startspeech"))
        self.postSpeechFrames = max(1, cmd_ln_int_r(decoderConfig, "-vad_postspeech"))
        self.freshCMN = CMNState(feat: feat, cmn: cmn)
        do {
            self.vad = try FrontEndVAD(config: decoderConfig)
        } catch {
            ps_free(ps)
            throw error
        }
        self.config = cmd_ln_retain(decoderConfig)
    }

    deinit {
        Self.lifecycleLock.lock()
        ps_free(ps)
        cmd_ln_free_r(config)
        Self.lifecycleLock.unlock()
    }

    private static func lastError(or fallback: String) -> String {
        let message = String(cString: steno_ps_last_error())
        return message.isEmpty ? fallback : message
    }

    /// Starts a new stream: frame counters and noise estimates restart (`ps_start_stream`),
    /// then the first utterance begins.
    func startStream() throws(StenoError) {
        ps_start_stream(ps)
        vad.startStream()
        try startUtterance()
    }

    func startUtterance() throws(StenoError) {
        guard !utteranceStarted else { return }
        guard ps_start_utt(ps) >= 0 else {
            throw StenoError(.internal, "pocketsphinx could not start an utterance: \(Self.lastError(or: "ps_start_utt failed"))")
        }
        vad.startUtterance()
        utteranceStarted = true
    }

    func endUtterance() throws(StenoError) {
        guard utteranceStarted else { return }
        utteranceStarted = false
        vad.endUtterance()
        guard ps_end_utt(ps) >= 0 else {
            throw StenoError(.internal, "pocketsphinx could not end an utterance: \(Self.lastError(or: "ps_end_utt failed"))")
        }
    }

    /// Feeds samples; throws if pocketsphinx reports an error.
    func process(_ samples: UnsafePointer<Int16>, count: Int) throws(StenoError) {
        guard ps_process_raw(ps, samples, count, 0, 0) >= 0 else {
            throw StenoError(.internal, "pocketsphinx failed to process audio: \(Self.lastError(or: "ps_process_raw failed"))")
        }
    }

    /// Voice activity as pocketsphinx's front end sees it after the last frame processed.
    var inSpeech: Bool { ps_get_in_speech(ps) != 0 }

    /// The current best path as `word:first-last:posterior` items (ps_seg_iter), for tests
    /// and diagnostics.
    var segmentation: String {
        var items: [String] = []
        var segment = ps_seg_iter(ps)
        while let current = segment {
            var first: Int32 = 0
            var last: Int32 = 0
            ps_seg_frames(current, &first, &last)
            let word = ps_seg_word(current).map { String(cString: $0) } ?? "?"
            items.append("\(word):\(first)-\(last):\(ps_seg_prob(current, nil, nil, nil))")
            segment = ps_seg_next(current)
        }
        return items.joined(separator: " ")
    }

    /// A posterior probability from `ps_seg_prob` (log base of the decoder's logmath) as 0...1.
    func probability(_ logProbability: Int32) -> Double {
        let p = logmath_exp(logmath, logProbability)
        return p.isFinite ? min(1, max(0, p)) : 0
    }

    /// Makes the decoder behave exactly like a fresh one for the next stream.
    ///
    /// What carries over between streams in this pocketsphinx (0.8+5prealpha, sphinxbase of
    /// 2016): the front end's noise estimates and sample counter (`ps_start_stream` resets
    /// them), its voice-activity state and overlap buffer (`ps_start_utt`), and the live
    /// cepstral mean: `cmn_live` keeps a running sum and frame count across utterances and
    /// streams, and `feat_cmn` switches the type from the model's `batch` to `live` on the
    /// first block. Restoring the mean, sum, count and type captured right after `ps_init`
    /// (sum and count are zero then, unlike what `cmn_live_set` would make) gives the same
    /// words, frames and scores as a new decoder; the tests check it.
    func resetForReuse() throws(StenoError) {
        if utteranceStarted {
            try endUtterance()
        }
        guard let feat = ps_get_feat(ps), let cmn = feat.pointee.cmn_struct else {
            throw StenoError(.internal, "pocketsphinx decoder lost its feature module")
        }
        freshCMN.restore(feat: feat, cmn: cmn)
        ps_start_stream(ps)
        vad.startStream()
    }
}

/// The live cepstral mean normalization state of a decoder (`cmn_t` plus `feat_t.cmn`).
private struct CMNState {
    let mean: [mfcc_t]
    let sum: [mfcc_t]
    let frames: Int32
    let type: cmn_type_t

    init(feat: UnsafeMutablePointer<feat_t>, cmn: UnsafeMutablePointer<cmn_t>) {
        let length = Int(max(0, cmn.pointee.veclen))
        mean = cmn.pointee.cmn_mean.map { Array(UnsafeBufferPointer(start: $0, count: length)) } ?? []
        sum = cmn.pointee.sum.map { Array(UnsafeBufferPointer(start: $0, count: length)) } ?? []
        frames = cmn.pointee.nframe
        type = feat.pointee.cmn
    }

    func restore(feat: UnsafeMutablePointer<feat_t>, cmn: UnsafeMutablePointer<cmn_t>) {
        let length = min(Int(max(0, cmn.pointee.veclen)), mean.count, sum.count)
        if let target = cmn.pointee.cmn_mean {
            for index in 0..<length { target[index] = mean[index] }
        }
        if let target = cmn.pointee.sum {
            for index in 0..<length { target[index] = sum[index] }
        }
        cmn.pointee.nframe = frames
        feat.pointee.cmn = type
    }
}
