import StenoCore

/// A speech detector: where speech starts and ends in a stream of audio, nothing of its words.
/// An engine that cannot tell that itself as it listens (Whisper hears whole utterances) has
/// one find its utterances (`UtteranceGate`). pocketsphinx's (`PocketSphinxSpeechDetector`)
/// is one; the tests script others.
///
/// Like a recognizer, one is used from one thread at a time. It takes mono samples in -1...1
/// at the rate it was made for, and reports `.speechStarted` and `.speechEnded` only,
/// alternating, starting with `.speechStarted`, with times in seconds from the first sample fed
/// to it. It may report a change some samples after the change (a detector decides in blocks
/// of its own), but how the audio is cut into calls does not change what it reports.
public protocol VoiceDetector: AnyObject {
    /// Feeds samples; the changes of voice activity decided with them.
    func accept(_ samples: UnsafeBufferPointer<Float>) -> [TranscriberEvent]

    /// How far back from the last sample fed an onset it has not reported yet may still lie
    /// (what it holds undecided, and how far its onsets reach back): whoever keeps the audio
    /// for a pre-roll keeps this much more.
    var undecidedSamples: Int { get }

    /// How many of the samples fed it has decided on: no change it reports later lies before
    /// this (a gate that waits for speech to come back knows when it will not).
    var decidedSamples: Int { get }
}

extension VoiceDetector {
    public var undecidedSamples: Int { 0 }

    public func accept(_ samples: [Float]) -> [TranscriberEvent] {
        samples.withUnsafeBufferPointer { accept($0) }
    }
}

extension PocketSphinxSpeechDetector: VoiceDetector {}
