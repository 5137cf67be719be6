import CAlsa
import CAlsaShims
import StenoAudio
import StenoCore
import StenoSystem

#if canImport(Glibc)
import Glibc
#endif

/// Where `steno send` gets its audio: a WAV file, standard input, or a capture device.
protocol AudioInput: AnyObject {
    var format: CapturedFormat { get }
    /// A live input (a device) cannot wait: when the sender's buffer is full its oldest audio
    /// is dropped. A file or a pipe waits instead, and nothing is lost.
    var isLive: Bool { get }
    /// Waits for the next samples (interleaved Float); nil at the end of the input.
    func read() throws(StenoError) -> [Float]?
}

/// Raw PCM on standard input: how to read it.
struct RawPCMFormat: Sendable, Equatable {
    enum Sample: String, CaseIterable, Sendable { case s16le, f32le }
    var sampleRate: Int
    var channels: Int
    var sample: Sample
}

/// A WAV stream (its header read first) or raw PCM as described, from standard input or a
/// file: read as it comes, never whole (a file may be hours long).
final class StreamInput: AudioInput {
    let format: CapturedFormat
    let isLive = false
    private let header: WAVHeader
    private var pending: [UInt8]
    /// Bytes of samples still to come when the header said how many; nil: to the end.
    private var remaining: Int?
    private var atEnd = false
    private let fd: Int32

    private let ownsDescriptor: Bool
    private let name: String

    /// A WAV file.
    convenience init(path: String) throws(StenoError) {
        let fd = open(path, O_RDONLY | O_CLOEXEC)
        guard fd >= 0 else { throw StenoError(.badAudio, "cannot open \(path): \(String(cString: strerror(errno)))") }
        do throws(StenoError) {
            try self.init(raw: nil, fd: fd, name: path, ownsDescriptor: true)
        } catch {
            close(fd)
            throw error
        }
        // A file that holds no audio is an error, as for steno transcribe.
        while pending.count < header.bytesPerFrame && !atEnd && remaining != 0 {
            let more = try Self.readSome(fd, name)
            if more.isEmpty { atEnd = true } else { pending += more }
        }
        if let remaining, pending.count > remaining { pending.removeLast(pending.count - remaining) }
        guard pending.count >= header.bytesPerFrame else { throw StenoError(.badAudio, "the file holds no audio") }
    }

    /// Reads the WAV header first when `raw` is nil (so the format is known before anything
    /// is sent): an error for a stream that is not WAV.
    init(raw: RawPCMFormat?, fd: Int32 = 0, name: String = "standard input", ownsDescriptor: Bool = false) throws(StenoError) {
        self.fd = fd
        self.name = name
        self.ownsDescriptor = ownsDescriptor
        if let raw {
            header = WAVHeader(sampleRate: raw.sampleRate, channels: raw.channels,
                               bitsPerSample: raw.sample == .s16le ? 16 : 32, isFloat: raw.sample == .f32le,
                               dataOffset: 0, dataSize: nil)
            pending = []
        } else {
            var bytes: [UInt8] = []
            var parsed: WAVHeader?
            while parsed == nil {
                let more = try Self.readSome(fd, name)
                if more.isEmpty {
                    parsed = try WAVHeader.parse(bytes, complete: true)
                    break
                }
                bytes += more
                if bytes.count > 1 << 20 { throw StenoError(.badAudio, "no WAV data chunk in the first megabyte") }
                parsed = try WAVHeader.parse(bytes, complete: false)
            }
            guard let parsed else { throw StenoError(.badAudio, "truncated WAV header") }
            header = parsed
            pending = Array(bytes[min(bytes.count, parsed.dataOffset)...])
            remaining = parsed.dataSize
        }
        format = CapturedFormat(sampleRate: header.sampleRate, channels: header.channels,
                                isSixteenBit: header.bitsPerSample == 16 && !header.isFloat)
    }

    func read() throws(StenoError) -> [Float]? {
        while true {
            if let remaining, pending.count > remaining { pending.removeLast(pending.count - remaining) }
            let whole = pending.count / header.bytesPerFrame * header.bytesPerFrame
            if whole > 0 && (whole >= 4096 || atEnd) {
                let samples = pending.withUnsafeBytes { header.decode(UnsafeRawBufferPointer(rebasing: $0[0..<whole])) }
                pending.removeFirst(whole)
                if remaining != nil { remaining! -= whole }
                return samples
            }
            if atEnd || remaining == 0 { return nil }
            let more = try Self.readSome(fd, name)
            if more.isEmpty { atEnd = true } else { pending += more }
        }
    }

    deinit { if ownsDescriptor { close(fd) } }

    private static func readSome(_ fd: Int32, _ name: String) throws(StenoError) -> [UInt8] {
        var buffer = [UInt8](repeating: 0, count: 16 * 1024)
        while true {
            let n = buffer.withUnsafeMutableBytes { Glibc.read(fd, $0.baseAddress, $0.count) }
            if n >= 0 { return Array(buffer[0..<n]) }
            if errno == EINTR { continue }
            throw StenoError(.badAudio, "cannot read \(name): \(String(cString: strerror(errno)))")
        }
    }
}

/// An ALSA capture device (`default`, `hw:1`, `plughw:1,0`, a name from `--list-devices`), as
/// 16-bit samples at the rate and channels asked for (ALSA's plug layer converts).
final class AlsaInput: AudioInput {
    let format: CapturedFormat
    let isLive = true
    let name: String
    private let pcm: OpaquePointer
    private var buffer: [Int16]
    private let framesPerRead: Int
    /// When capture started and how much was read since, to notice a device that delivers
    /// faster than real time (ALSA's `null` or `file` devices): it is slowed to real time.
    private var started: Double?
    private var framesRead = 0

    init(device: String, sampleRate: Int, channels: Int) throws(StenoError) {
        steno_alsa_quiet_errors()
        var handle: OpaquePointer?
        var rc = snd_pcm_open(&handle, device, SND_PCM_STREAM_CAPTURE, 0)
        guard rc >= 0, let handle else {
            throw StenoError(.badAudio, "cannot open the capture device '\(device)': \(Self.text(rc)) (see steno send --list-devices)")
        }
        // 0.5 s of buffer in the device: room for the sender's thread to be late.
        rc = snd_pcm_set_params(handle, SND_PCM_FORMAT_S16_LE, SND_PCM_ACCESS_RW_INTERLEAVED,
                                UInt32(channels), UInt32(sampleRate), 1, 500_000)
        guard rc >= 0 else {
            snd_pcm_close(handle)
            throw StenoError(.badAudio, "the device '\(device)' cannot capture \(channels) channel(s) at \(sampleRate) Hz: \(Self.text(rc))")
        }
        pcm = handle
        name = device
        format = CapturedFormat(sampleRate: sampleRate, channels: channels, isSixteenBit: true)
        framesPerRead = max(1, sampleRate / 50)
        buffer = [Int16](repeating: 0, count: framesPerRead * channels)
    }

    deinit { snd_pcm_close(pcm) }

    func read() throws(StenoError) -> [Float]? {
        let count = framesPerRead
        var n = buffer.withUnsafeMutableBytes { snd_pcm_readi(pcm, $0.baseAddress, snd_pcm_uframes_t(count)) }
        if n < 0 {
            // An overrun (the sender was late): recover and go on; the lost audio is not counted.
            let recovered = snd_pcm_recover(pcm, Int32(n), 1)
            guard recovered >= 0 else { throw StenoError(.badAudio, "capture from '\(name)' failed: \(Self.text(Int32(n)))") }
            n = 0
        }
        let now = SystemClock.now()
        if started == nil { started = now }
        framesRead += Int(n)
        let ahead = Double(framesRead) / Double(format.sampleRate) - (now - started!)
        if ahead > 1 { usleep(UInt32(min(2, ahead - 0.5) * 1_000_000)) }
        return buffer[0..<(Int(n) * format.channels)].map { Float($0) / 32768 }
    }

    static func text(_ rc: Int32) -> String { String(cString: snd_strerror(rc)) }

    /// The PCM devices ALSA knows that can capture: name and description.
    static func devices() -> [(name: String, description: String)] {
        steno_alsa_quiet_errors()
        var hints: UnsafeMutablePointer<UnsafeMutableRawPointer?>?
        guard snd_device_name_hint(-1, "pcm", &hints) == 0, let hints else { return [] }
        defer { snd_device_name_free_hint(hints) }
        var found: [(String, String)] = []
        var p = hints
        while let hint = p.pointee {
            func field(_ id: String) -> String? {
                guard let value = snd_device_name_get_hint(hint, id) else { return nil }
                defer { free(value) }
                return String(cString: value)
            }
            if let name = field("NAME"), field("IOID") != "Output" {
                let description = (field("DESC") ?? "").split(whereSeparator: \.isNewline).joined(separator: " — ")
                found.append((name, description))
            }
            p += 1
        }
        return found
    }
}
