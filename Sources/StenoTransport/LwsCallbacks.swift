import CLibWebSockets
import StenoSystem
import Synchronization

// The C entry points libwebsockets calls, as global functions. Each finds its Swift
// object through a pointer lws hands back, never through mutable globals, except
// the log sink: lws logging is process-wide, so its sink is a lock-protected global.

/// The protocol callback: finds the `ServiceLoop` through the context's user
/// pointer (set at context creation, `Unmanaged`, kept alive by the transport until
/// the context is destroyed).
func stenoLwsCallback(_ wsi: OpaquePointer?, _ reason: lws_callback_reasons, _ user: UnsafeMutableRawPointer?,
                      _ input: UnsafeMutableRawPointer?, _ length: Int) -> Int32 {
    guard let wsi, let ctx = lws_get_context(wsi), let contextUser = lws_context_user(ctx) else { return 0 }
    let loop = Unmanaged<ServiceLoop>.fromOpaque(contextUser).takeUnretainedValue()
    return loop.callback(wsi, reason, input, length)
}

/// The tick timer: the `lws_sorted_usec_list_t` is followed in memory by a pointer
/// to its `ServiceLoop`.
func stenoTickCallback(_ sul: UnsafeMutablePointer<lws_sorted_usec_list_t>?) {
    guard let sul else { return }
    ServiceLoop.fromTickTimer(UnsafeMutableRawPointer(sul)).tick()
}

/// The closing-handshake timer, laid out like the tick timer.
func stenoCloseTimerCallback(_ sul: UnsafeMutablePointer<lws_sorted_usec_list_t>?) {
    guard let sul else { return }
    ServiceLoop.fromTickTimer(UnsafeMutableRawPointer(sul)).startClosingHandshakes()
}

/// Where lws log lines go (warnings and errors only).
let lwsLogSink = Locked<Log?>(nil)

/// The last lws line, and how often it came again since it was written: lws repeats some
/// errors in a tight loop (at the open-file limit, `accept: errno 24` for every turn of the
/// loop, millions a minute), so a line that repeats is written at most once a second, with
/// its count.
private struct RepeatedLine {
    var text = ""
    var repeats = 0
    var writtenAt = ContinuousClock.now
}
private let lwsLastLine = Locked(RepeatedLine())

func stenoLwsLogEmit(_ level: Int32, _ line: UnsafePointer<CChar>?) {
    guard let line else { return }
    var text = String(decoding: UnsafeRawBufferPointer(start: line, count: strlen(line)), as: UTF8.self)
    while text.last == "\n" || text.last == "\r" { text.removeLast() }
    let mapped: LogLevel = (level & Int32(LLL_ERR)) != 0 ? .error : .warning
    let now = ContinuousClock.now
    let (write, repeated): (Bool, Int) = lwsLastLine.withLock { last in
        if last.text == text {
            last.repeats += 1
            guard now - last.writtenAt >= .seconds(1) else { return (false, 0) }
            let n = last.repeats
            last.repeats = 0
            last.writtenAt = now
            return (true, n)
        }
        let n = last.repeats
        last = RepeatedLine(text: text, repeats: 0, writtenAt: now)
        return (true, -n)
    }
    guard write else { return }
    let sink = lwsLogSink.withLock { $0 }
    if repeated < 0 { sink?(mapped, "lws: (the line before came \(-repeated) more times)") }
    sink?(mapped, repeated > 0 ? "lws: \(text) (\(repeated) times in the last second or more)" : "lws: " + text)
}

/// Routes lws logging (warnings and errors) to `handler`. Process-wide: the last
/// transport started wins.
func installLwsLogging(_ handler: Log) {
    lwsLogSink.withLock { sink in
        sink = handler
        // Under the lock: lws keeps the level in a plain global.
        lws_set_log_level(Int32(LLL_ERR | LLL_WARN), stenoLwsLogEmit)
    }
}
