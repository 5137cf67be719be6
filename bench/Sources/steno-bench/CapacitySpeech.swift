// steno-bench capacity: what each session says (CapacityBench.swift).
import Foundation
import StenoAudio
import StenoCore
import StenoSpeech
import StenoSystem
import StenoTestSupport

#if canImport(Glibc)
import Glibc
#endif

// MARK: - The speech

struct SpokenUtterance {
    var name: String
    /// Its WAV file (the Whisper floor reads it).
    var path: String
    var samples: [Int16]
    var reference: [String]
    var seconds: Double { Double(samples.count) / 16000 }
}

/// The utterances with references, sets taken in turn (LibriVox, cards, synthetic, LibriVox…)
/// so that any stretch of the list has some of each.
func loadSpokenUtterances() throws -> [SpokenUtterance] {
    let sets = [("Tests/StenoSpeechTests/Resources/librivox", "transcription"),
                ("Tests/StenoSpeechTests/Resources/cards", "cards.transcription"),
                ("bench/phrases/tts", "transcription")]
    var lists: [[SpokenUtterance]] = []
    for (folder, file) in sets {
        guard let text = try? String(contentsOfFile: "\(folder)/\(file)", encoding: .utf8) else {
            throw TalkerError("no references at \(folder)/\(file) (run from the package root)")
        }
        var list: [SpokenUtterance] = []
        // `<s> words </s> (name)`, one utterance a line.
        for line in text.split(separator: "\n") {
            guard let open = line.lastIndex(of: "("), let close = line.lastIndex(of: ")"), open < close else { continue }
            let name = String(line[line.index(after: open)..<close])
            let words = normalizedWords(String(line[..<open]))
            let wav: WAVFile
            do throws(StenoError) { wav = try WAVFile(path: "\(folder)/\(name).wav") } catch {
                throw TalkerError("\(folder)/\(name).wav: \(error.message)")
            }
            guard wav.sampleRate == 16000 else { throw TalkerError("\(folder)/\(name).wav is not 16 kHz") }
            let samples = wav.mono.map { Int16(max(-32768, min(32767, ($0 * 32768).rounded()))) }
            list.append(SpokenUtterance(name: name, path: "\(folder)/\(name).wav", samples: samples, reference: words))
        }
        lists.append(list)
    }
    var merged: [SpokenUtterance] = []
    for i in 0..<(lists.map(\.count).max() ?? 0) {
        for list in lists where i < list.count { merged.append(list[i]) }
    }
    return merged
}

/// Lowercase words without pocketsphinx's markers or punctuation, as the references are
/// written: Whisper's digits as words ("5" → "five", up to ten), "Mr."/"Mrs."/"Dr." as
/// "mister", "missus" and "doctor", a hyphenated word as its parts (as bench/streaming.py
/// normalizes). Used for references and for what either engine heard.
func normalizedWords(_ text: String) -> [String] {
    let spelled = ["0": "zero", "1": "one", "2": "two", "3": "three", "4": "four", "5": "five", "6": "six", "7": "seven",
                   "8": "eight", "9": "nine", "10": "ten", "mr": "mister", "mrs": "missus", "dr": "doctor"]
    return text.lowercased().replacingOccurrences(of: "-", with: " ")
        .split(whereSeparator: { $0 == " " || $0 == "\t" })
        .filter { !$0.hasPrefix("<") }
        .map { String($0.filter { $0.isLetter || $0.isNumber || $0 == "'" }) }
        .filter { !$0.isEmpty }
        .map { spelled[$0] ?? $0 }
}

/// What one session says: its audio (speech and pauses) and where each utterance lies on
/// its timeline. Deterministic for (session, count): both designs get the same audio.
struct SessionPlan {
    struct Spoken {
        var start: Double
        var end: Double
        var reference: [String]
    }

    var session: Int
    /// When it connects, after the first session (seconds).
    var delay: Double
    var frames: [[UInt8]]
    var spoken: [Spoken]
    var audioSeconds: Double
    var speechSeconds: Double
    var speechFraction: Double { speechSeconds / max(audioSeconds, 1e-9) }

    /// Session `k` of `n` connects `k × stagger` seconds after the first and streams until
    /// about `seconds` after the last one connected, so that all stream together for that long.
    init(session k: Int, of n: Int, speech: [SpokenUtterance], seconds: Double, stagger: Double) {
        session = k
        delay = Double(k) * stagger
        var random = SplitMix(seed: UInt64(k) &* 0x9E37_79B9 &+ 17)
        let length = seconds + Double(n - 1 - k) * stagger
        var samples: [Int16] = []
        func pause(_ duration: Double) {
            // Faint noise (±4 of 32768, about −80 dBFS): a quiet room, not digital zeros.
            for _ in 0..<Int(duration * 16000) { samples.append(Int16(Int(random.next() % 9) - 4)) }
        }
        pause(0.3 + random.unit() * 1.2)
        var spoken: [Spoken] = []
        var speechSamples = 0
        var next = (k * 7) % speech.count
        while Double(samples.count) / 16000 < length {
            let utterance = speech[next]
            next = (next + 1) % speech.count
            let start = Double(samples.count) / 16000
            samples += utterance.samples
            speechSamples += utterance.samples.count
            spoken.append(Spoken(start: start, end: Double(samples.count) / 16000, reference: utterance.reference))
            pause(max(1, utterance.seconds * (0.6 + 0.8 * random.unit())))
        }
        var pcm = [UInt8]()
        pcm.reserveCapacity(samples.count * 2)
        for sample in samples {
            let bits = UInt16(bitPattern: sample)
            pcm.append(UInt8(bits & 0xff))
            pcm.append(UInt8(bits >> 8))
        }
        frames = pcmFrames(pcm)
        self.spoken = spoken
        audioSeconds = Double(samples.count) / 16000
        speechSeconds = Double(speechSamples) / 16000
    }
}
