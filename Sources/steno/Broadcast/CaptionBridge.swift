import Foundation
import StenoCore

/// Where `steno listen` sends a channel's captions besides standard output: OBS
/// (`OBSBridge`), YouTube (`YouTubeBridge`). Called on the listener's thread; a bridge does
/// its I/O on a thread of its own, so a slow or absent OBS or YouTube never holds up the
/// listener, nor another bridge.
protocol CaptionBridge: AnyObject, Sendable {
    /// A publisher's timeline begins (the channel's `joined`): audio time 0 is `startedAt`,
    /// seconds since 1970 on this machine's clock (nil when the server did not say).
    func timeline(startedAt: Double?)
    func final(_ result: RecognitionResult)
    func volatile(_ text: String)
    /// The broadcast ended (or the listener stops): what waits for a next final goes now.
    func finish()
    /// Stops the bridge, giving what is still waiting up to `timeout` seconds to go out.
    func stop(timeout: Double)
}

/// A bridge's thread: posts go into its mailbox; `run` takes them until `stop`.
final class BridgeThread<Input: Sendable>: Sendable {
    let mailbox = BlockingQueue<Input>()
    private let done = BlockingQueue<Bool>()

    /// Starts `body` on a thread of its own; it returns when the bridge is done.
    func start(name: String, _ body: @escaping @Sendable () -> Void) {
        let done = self.done
        let thread = Thread {
            body()
            done.post(true)
        }
        thread.name = name
        thread.start()
    }

    /// Waits for the thread to end, for at most `timeout` seconds.
    func join(timeout: Double) {
        _ = done.take(timeout: timeout)
    }
}
