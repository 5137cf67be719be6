// steno-bench capacity: the engine's own cost on the same speech, for the compute bound (CapacityBench.swift).
import Foundation
import StenoAudio
import StenoCore
import StenoSpeech
import StenoSystem
import StenoTestSupport

#if canImport(Glibc)
import Glibc
#endif

// MARK: - The engine's RTF

struct EngineRTF {
    var value: Double
    var audioSeconds: Double
    var loading: Double
}

/// `pocketsphinx_continuous` with Steno's decoder options reading raw 16 kHz PCM from a pipe,
/// written in 20 ms pieces at real time (as a live source would; read from a file as fast as
/// possible it costs 20–30 % less): the utterances back to back, about `seconds` of them. CPU
/// per audio second, its model loading (the least of three runs on 0.1 s) taken out.
func measureEngineRTF(speech: [SpokenUtterance], seconds: Double) -> EngineRTF? {
    var samples: [Int16] = []
    for utterance in speech where Double(samples.count) / 16000 < seconds { samples += utterance.samples }
    let pcm = samples.flatMap { sample -> [UInt8] in
        let bits = UInt16(bitPattern: sample)
        return [UInt8(bits & 0xff), UInt8(bits >> 8)]
    }
    let loading = (0..<3).compactMap { _ in runPipedCLI(pcm: [UInt8](repeating: 0, count: 3200), realTime: false) }.min()
    guard let loading, let cpu = runPipedCLI(pcm: pcm, realTime: true) else { return nil }
    let audio = Double(samples.count) / 16000
    return EngineRTF(value: max(0, cpu - loading) / audio, audioSeconds: audio, loading: loading)
}

/// One run of the CLI on `pcm` through its standard input: its CPU seconds, or nil.
func runPipedCLI(pcm: [UInt8], realTime: Bool) -> Double? {
    let arguments = ["-infile", "/dev/stdin", "-logfn", "/dev/null"] + PocketSphinxConfiguration().decoderArguments
    guard let child = Child.spawn("/usr/bin/pocketsphinx_continuous", arguments, stdout: true, stdin: true),
          let input = child.stdinFD else { return nil }
    let feeder = Thread {
        let start = monotonicSeconds()
        var offset = 0
        var index = 0
        while offset < pcm.count {
            let end = realTime ? min(pcm.count, offset + 640) : pcm.count
            let written = pcm[offset..<end].withUnsafeBytes { write(input, $0.baseAddress, $0.count) }
            if written <= 0 { break }
            offset += written
            index += 1
            if realTime {
                let wait = start + Double(index) * 0.02 - monotonicSeconds()
                if wait > 0 { usleep(UInt32(wait * 1e6)) }
            }
        }
        close(input)
    }
    feeder.start()
    _ = child.readAllStdout()
    let usage = child.waitWithUsage()
    if let fd = child.stdoutFD { close(fd) }
    while !feeder.isFinished { usleep(1000) }
    return usage.cpu
}

/// Whisper's batch floor on the same utterances, about `seconds` of them: the same model's
/// faster-whisper transcription of each whole file (bench/whisper_floor.py, in the virtual
/// environment of scripts/bootstrap.sh), CPU per audio second with the model's loading left out.
func measureWhisperFloor(speech: [SpokenUtterance], seconds: Double, python: String = ".venv/bin/python") -> EngineRTF? {
    var paths: [String] = []
    var audio = 0.0
    for utterance in speech where audio < seconds {
        paths.append(utterance.path)
        audio += utterance.seconds
    }
    guard let child = Child.spawn(python, ["bench/whisper_floor.py"] + paths, stdout: true) else { return nil }
    let output = child.readAllStdout()
    _ = child.waitWithUsage()
    guard case .object(let o)? = try? JSONParser().parse(output), case .number(let rtf)? = o["rtf"],
          case .number(let seconds)? = o["audio"], case .number(let loading)? = o["loading"] else { return nil }
    return EngineRTF(value: rtf, audioSeconds: seconds, loading: loading)
}
