import CCrypto

/// SHA-256, for what must be checked without being kept: a session's resume token is proved to
/// another instance by its digest in Redis (`ChannelRelay`'s lease proof), never the token
/// itself; OBS's password is proved by digests (`steno listen --obs`). Why a wrapper:
/// libcrypto's one-shot `SHA256(3)` takes pointers and gives bytes.
public enum SHA256 {
    /// The digest of `bytes`.
    public static func digest(_ bytes: [UInt8]) -> [UInt8] {
        var digest = [UInt8](repeating: 0, count: Int(SHA256_DIGEST_LENGTH))
        _ = CCrypto.SHA256(bytes, bytes.count, &digest)
        return digest
    }

    /// The digest of `text`'s UTF-8, in lowercase hex.
    public static func hex(_ text: String) -> String {
        let digits = Array("0123456789abcdef")
        return String(digest(Array(text.utf8)).flatMap { [digits[Int($0 >> 4)], digits[Int($0 & 15)]] })
    }
}
