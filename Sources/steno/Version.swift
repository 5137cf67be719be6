import StenoServer

enum StenoVersion {
    /// One version for the binary and the server it runs (the `Server` header, /healthz).
    static let string = StenoServer.version
}
