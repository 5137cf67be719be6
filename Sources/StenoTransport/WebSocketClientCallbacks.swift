import CLibWebSockets

/// The protocol callback of client contexts: finds the `WebSocketClient` through the
/// context's user pointer (set at context creation; the client outlives its context, which
/// its own service thread destroys).
func stenoLwsClientCallback(_ wsi: OpaquePointer?, _ reason: lws_callback_reasons, _ user: UnsafeMutableRawPointer?,
                            _ input: UnsafeMutableRawPointer?, _ length: Int) -> Int32 {
    guard let wsi, let ctx = lws_get_context(wsi), let contextUser = lws_context_user(ctx) else { return 0 }
    let client = Unmanaged<WebSocketClient>.fromOpaque(contextUser).takeUnretainedValue()
    return client.callback(wsi, reason, input, length)
}

/// The keepalive's timer of a client context (`WebSocketClient.keepAliveTick`): the
/// `lws_sorted_usec_list_t` is followed in memory by a pointer to its client.
func stenoLwsClientKeepAliveCallback(_ sul: UnsafeMutablePointer<lws_sorted_usec_list_t>?) {
    guard let sul else { return }
    WebSocketClient.client(ofKeepAliveTimer: UnsafeMutableRawPointer(sul)).keepAliveTick()
}
