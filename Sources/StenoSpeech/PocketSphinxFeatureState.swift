// A session's feature state (`FeatureState`): the live cepstral mean and feature context
// that carry over from one of its utterances to the next, copied out of a decoder at the
// end of an utterance and put into whichever decoder serves the next one
// (PocketSphinxDecoder.swift).

import CPocketSphinx

/// A session's feature state: what of the feature computation carries over from one of its
/// utterances to the next in a decoder of its own, kept by the session between utterances and
/// put into whichever decoder serves the next one.
///
/// - The live cepstral mean (`cmn_t`'s mean, sum and frame count, and `feat_t.cmn`, which the
///   first block turns from the model's `batch` to `live`).
/// - The live feature context: the last `window` cepstra before the read position of the
///   features' ring (`feat_t.cepbuf`). In `ps_process_raw`'s loop an utterance whose first
///   block brings no frames (it starts in silence) is started with nothing (`acmod` hands the
///   features an empty first batch), and its first frames then take their left context from
///   the end of the previous utterance instead of copies of themselves. Keeping that context
///   makes a session's finals those of a decoder of its own exactly, scores included.
struct FeatureState: Sendable, Equatable {
    let mean: [mfcc_t]
    let sum: [mfcc_t]
    let frames: Int32
    let type: cmn_type_t
    /// The `window` cepstra before the features' read position, oldest first.
    let context: [[mfcc_t]]

    init(feat: UnsafeMutablePointer<feat_t>, cmn: UnsafeMutablePointer<cmn_t>) {
        let length = Int(max(0, cmn.pointee.veclen))
        mean = cmn.pointee.cmn_mean.map { Array(UnsafeBufferPointer(start: $0, count: length)) } ?? []
        sum = cmn.pointee.sum.map { Array(UnsafeBufferPointer(start: $0, count: length)) } ?? []
        frames = cmn.pointee.nframe
        type = feat.pointee.cmn
        let window = Int(max(0, feat.pointee.window_size))
        let size = Int(max(0, feat.pointee.cepsize))
        var context: [[mfcc_t]] = []
        if let ring = feat.pointee.cepbuf {
            for k in 0..<window {
                let row = Self.ringIndex(feat.pointee.curpos, -window + k)
                context.append(ring[row].map { Array(UnsafeBufferPointer(start: $0, count: size)) } ?? [])
            }
        }
        self.context = context
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
        let window = Int(max(0, feat.pointee.window_size))
        let size = Int(max(0, feat.pointee.cepsize))
        if let ring = feat.pointee.cepbuf, context.count == window {
            for k in 0..<window {
                guard let target = ring[Self.ringIndex(feat.pointee.curpos, -window + k)] else { continue }
                for index in 0..<min(size, context[k].count) { target[index] = context[k][index] }
            }
        }
    }

    /// A position in sphinxbase's live feature ring (`LIVEBUFBLOCKSIZE` cepstra).
    private static func ringIndex(_ position: Int32, _ offset: Int) -> Int {
        let size = Int(LIVEBUFBLOCKSIZE)
        return ((Int(position) + offset) % size + size) % size
    }
}
