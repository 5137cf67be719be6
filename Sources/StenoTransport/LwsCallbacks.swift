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
let lwsLogSink = Mutex<Log?>(nil)

func stenoLwsLogEmit(_ level: Int32, _ line: UnsafePointer<CChar>?) {
    guard let line else { return }
    var text = String(decoding: UnsafeRawBufferPointer(start: line, count: strlen(line)), as: UTF8.self)
    while text.last == "\n" || text.last == "\r" { text.removeLast() }
    let mapped: LogLevel = (level & Int32(LLL_ERR)) != 0 ? .error : .warning
    let sink = lwsLogSink.withLock { $0 }
    sink?(mapped, "lws: " + text)
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
