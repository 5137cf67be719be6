import CCrypto

/// SHA-256, for what must be checked without being kept: a session's resume token is proved to
/// another instance by its digest in Redis (`ChannelRelay`'s lease proof), never the token
/// itself. Why a wrapper: libcrypto's one-shot `SHA256(3)` takes pointers and gives bytes.
enum SHA256 {
    /// The digest of `text`'s UTF-8, in lowercase hex.
    static func hex(_ text: String) -> String {
        let bytes = Array(text.utf8)
        var digest = [UInt8](repeating: 0, count: Int(SHA256_DIGEST_LENGTH))
        _ = CCrypto.SHA256(bytes, bytes.count, &digest)
        let digits = Array("0123456789abcdef")
        return String(digest.flatMap { [digits[Int($0 >> 4)], digits[Int($0 & 15)]] })
    }
}
