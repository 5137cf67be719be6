import Foundation
import StenoAudio
import StenoCore
import StenoSystem
import Synchronization

/// The sender's audio, shared by the capture thread (which appends) and the main loop
/// (which sends).
final class SharedSendBuffer: Sendable {
    // `Locked`, not `Mutex`: ThreadSanitizer cannot see a `Mutex` on Linux (StenoSystem.Locked).
    private let state: Locked<SendBuffer>
    init(limitSeconds: Double) { state = Locked(SendBuffer(limitSeconds: limitSeconds)) }
    func withLock<R>(_ body: (inout SendBuffer) -> R) -> R { state.withLock { body(&$0) } }
}

/// Reads the input on a thread of its own and turns it into frames in the send buffer: at
/// real time for a WAV file (unless `--fast`), as it comes for a pipe or a device.
final class Capture: @unchecked Sendable {
    private let input: any AudioInput
    private let encoder: FrameEncoder
    private let buffer: SharedSendBuffer
    private let inbox: Inbox
    private let paced: Bool
    private let stopped = Atomic<Bool>(false)

    init(input: any AudioInput, encoder: FrameEncoder, buffer: SharedSendBuffer, inbox: Inbox, paced: Bool) {
        self.input = input
        self.encoder = encoder
        self.buffer = buffer
        self.inbox = inbox
        self.paced = paced
    }

    func start() {
        let thread = Thread { [self] in run() }
        thread.name = "steno-capture"
        thread.start()
    }

    /// No more audio is taken (a read under way may still finish).
    func stop() { stopped.store(true, ordering: .relaxed) }

    private var isStopped: Bool { stopped.load(ordering: .relaxed) }

    private func run() {
        let started = SystemClock.now()
        do throws(StenoError) {
            while !isStopped {
                guard let samples = try input.read() else { break }
                for frame in try encoder.add(samples) { deliver(frame, started) }
            }
            if !isStopped { for frame in try encoder.finish() { deliver(frame, started) } }
            inbox.post(.inputEnded(error: nil))
        } catch {
            inbox.post(.inputEnded(error: error.message))
        }
    }

    private func deliver(_ frame: AudioFrame, _ started: Double) {
        if paced {
            // Released when it would have been captured; late frames (after a wait) go at once.
            while !isStopped {
                let wait = started + frame.start - SystemClock.now()
                if wait <= 0 { break }
                usleep(UInt32(min(wait, 0.1) * 1_000_000))
            }
        }
        if !input.isLive {
            // A file or a pipe waits for room: nothing it holds is lost.
            while !isStopped && !buffer.withLock({ $0.hasRoom }) { usleep(5_000) }
        }
        if isStopped { return }
        buffer.withLock { _ = $0.append(frame, live: input.isLive) }
        inbox.post(.audio)
    }
}
