// G.711 (ITU-T): telephone audio, 8 bits a sample, companded with μ-law (North America, Japan)
// or A-law (elsewhere). Deepgram's `mulaw`/`alaw` and OpenAI Realtime's `g711_ulaw`/`g711_alaw`
// carry it; the pipeline takes 16-bit PCM, which each byte expands to.

/// The two companding laws of G.711.
public enum G711: Sendable, Hashable {
    case muLaw
    case aLaw

    /// One byte as a 16-bit linear sample.
    public func linear(_ byte: UInt8) -> Int16 {
        switch self {
        case .muLaw:
            let u = ~byte
            let exponent = Int((u >> 4) & 7)
            let magnitude = ((Int(u & 0x0F) << 3) + 0x84) << exponent - 0x84
            return Int16(u & 0x80 != 0 ? -magnitude : magnitude)
        case .aLaw:
            let a = byte ^ 0x55
            let exponent = Int((a >> 4) & 7)
            let mantissa = Int(a & 0x0F)
            let magnitude = exponent == 0 ? (mantissa << 4) + 8 : ((mantissa << 4) + 0x108) << (exponent - 1)
            return Int16(a & 0x80 != 0 ? magnitude : -magnitude)
        }
    }

    /// Bytes of G.711 as 16-bit little-endian PCM (two bytes each).
    public func pcmS16LE(_ bytes: [UInt8]) -> [UInt8] {
        var out = [UInt8](repeating: 0, count: bytes.count * 2)
        for (index, byte) in bytes.enumerated() {
            let sample = UInt16(bitPattern: linear(byte))
            out[2 * index] = UInt8(sample & 0xFF)
            out[2 * index + 1] = UInt8(sample >> 8)
        }
        return out
    }
}
