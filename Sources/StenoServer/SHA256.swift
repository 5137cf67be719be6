import CCrypto

/// SHA-256, for what must be checked without being kept: a session's resume token is proved to
/// another instance by its digest in Redis (`ChannelRelay`'s lease proof), never the token
/// itself; OBS's password is proved by digests (`steno listen --obs`). Why a wrapper:
/// libcrypto's one-shot `SHA256(3)` takes pointers and gives bytes. `Stream` digests what comes
/// in pieces (a Deepgram session's audio, for its `Metadata`).
public enum SHA256 {
    /// The digest of `bytes`.
    public static func digest(_ bytes: [UInt8]) -> [UInt8] {
        var digest = [UInt8](repeating: 0, count: Int(SHA256_DIGEST_LENGTH))
        _ = CCrypto.SHA256(bytes, bytes.count, &digest)
        return digest
    }

    /// The digest of `text`'s UTF-8, in lowercase hex.
    public static func hex(_ text: String) -> String { hex(digest: digest(Array(text.utf8))) }

    /// A digest in lowercase hex.
    static func hex(digest: [UInt8]) -> String {
        let digits = Array("0123456789abcdef")
        return String(digest.flatMap { [digits[Int($0 >> 4)], digits[Int($0 & 15)]] })
    }

    /// A digest of bytes given piece by piece. Why a class: it owns libcrypto's context, freed
    /// in `deinit`. Used by one session under its lock.
    public final class Stream: @unchecked Sendable {
        private let context: OpaquePointer?

        public init() {
            context = EVP_MD_CTX_new()
            EVP_DigestInit_ex(context, EVP_sha256(), nil)
        }

        deinit { EVP_MD_CTX_free(context) }

        public func update(_ bytes: [UInt8]) {
            bytes.withUnsafeBytes { _ = EVP_DigestUpdate(context, $0.baseAddress, $0.count) }
        }

        /// The digest of everything given so far, in lowercase hex (the stream goes on).
        public func hex() -> String {
            let copy = EVP_MD_CTX_new()
            defer { EVP_MD_CTX_free(copy) }
            EVP_MD_CTX_copy_ex(copy, context)
            var digest = [UInt8](repeating: 0, count: Int(SHA256_DIGEST_LENGTH))
            var length: UInt32 = 0
            EVP_DigestFinal_ex(copy, &digest, &length)
            return SHA256.hex(digest: digest)
        }
    }
}
