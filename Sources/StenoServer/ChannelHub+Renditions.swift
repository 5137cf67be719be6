// A channel's languages (`Renditions`): each viewer follows the publisher's captions or, on a
// translated broadcast, the original speech (`?language=`), and so do caption files and HLS.

import StenoCore
import StenoTransport

extension ChannelHub {
    /// What `viewer` of `name` is sent on joining or when a broadcast begins: `joined`, the
    /// broadcast's state, its finals so far and the volatile showing, in the language it asked
    /// for; and, when the broadcast carries none in that language, a non-fatal `bad_message`
    /// naming those it does carry (it is then sent the publisher's own).
    func welcome(_ viewer: ConnectionID, channel name: String, _ channel: Channel, now: UTCTime) -> [EncodedEvent] {
        let current = channel.current
        let asked = channel.asked[viewer]
        let choice = current.map { $0.renditions.choose(asked) } ?? .captions
        var events = ViewerWelcome.events(
            channel: name, startedAt: current?.startedAt ?? now,
            backfill: choice == .original ? (current?.finals ?? []).compactMap(\.originalResult) : current?.finals ?? [],
            showingVolatile: choice == .original ? nil : current?.showingVolatile, includeWords: current?.includeWords ?? true,
            publisher: current.map { ($0.state, $0.id) })
        if let current, choice == nil, let asked {
            let carried = current.renditions.names
            let message = "this broadcast has no captions in \"\(asked)\"" + (carried.isEmpty ? "" : "; it has "
                + carried.joined(separator: ", ")) + " (you are sent the publisher's own)"
            events.insert(ServerEvent.error(StenoError(.badMessage, message)).encoded(), at: min(2, events.count))
        }
        return events
    }

    /// A publisher's event as a viewer of the original gets it: a final's original (nil when
    /// it has none), no volatile (the original has none: its finals come with the translation's),
    /// any other event as it is.
    static func original(of event: EncodedEvent, includeWords: Bool) -> EncodedEvent? {
        switch event.kind {
        case .final: event.result?.originalResult.map { ServerEvent.final($0, includeWords: includeWords).encoded() }
        case .volatile: nil
        default: event
        }
    }

    /// A broadcast's HLS track in `language`; nil when it carries none in it.
    static func track(of broadcast: Broadcast, language: String?) -> HLSCaptionTrack? {
        switch broadcast.renditions.choose(language) {
        case .captions?: broadcast.captions.hls
        case .original?: broadcast.original?.hls
        case nil: nil
        }
    }
}

/// One rendition's caption cues and the live HLS track made of them, fed as the broadcast goes.
struct CaptionTrack: Sendable {
    var cues: CaptionCueBuilder
    var hls: HLSCaptionTrack

    /// A final: its cues, those the rules settled, into the track.
    mutating func add(_ final: RecognitionResult) {
        hls.add(cues.add(final))
    }

    /// No final still to come starts before `floor`: cues settle, and segments are published
    /// through where no cue can still come.
    mutating func settle(before floor: Double) {
        hls.add(cues.settle(before: floor))
        hls.advance(settledThrough: min(max(floor, cues.floor), cues.pendingStart ?? .infinity))
    }

    /// The broadcast is over after `duration` seconds: the rest of the cues, and the end of the track.
    mutating func end(duration: Double) {
        hls.add(cues.finish())
        hls.end(duration: duration)
    }
}
