// The speech benchmark's third part (SpeechBench.swift has the first two and the files):
// pocketsphinx's decoder options over every labelled file, with the word error rate per
// group, CPU, the end-of-utterance tail and how well confidences separate right from wrong.

import CPocketSphinx
import Foundation
import StenoCore
import StenoSpeech

extension SpeechBench {
    // MARK: Options: WER, CPU, the end-of-utterance tail, confidences

    /// One row of the options tables: the decoder arguments and what the row is called.
    struct DecoderOptions {
        let label: String
        let arguments: [String]
    }

    /// The option sets compared: pocketsphinx's defaults, Steno's (second: the calibration
    /// table is Steno's), Steno's with the second pass (`-fwdflat`) and the lattice
    /// (`-bestpath`) on or off, pocketsphinx's with other pruning, then `--options`. Steno's
    /// options are `recommendedArguments` whatever they are, and a row is labelled by how it
    /// differs from them, so the rows follow a change of the default; a set that decodes as
    /// an earlier one (the same value of every option, given or by default) is left out.
    func optionSets() -> [DecoderOptions] {
        let steno = PocketSphinxConfiguration.recommendedArguments
        var candidates = [DecoderOptions(label: "(pocketsphinx defaults)", arguments: []),
                          DecoderOptions(label: "Steno default: " + steno.joined(separator: " "), arguments: steno)]
        var changes = [["-fwdflat", "no"], ["-fwdflat", "yes"]]
        if !settings.quick {
            changes += [["-bestpath", "no"], ["-fwdflat", "no", "-bestpath", "no"], ["-fwdflat", "yes", "-bestpath", "no"]]
        }
        candidates += changes.map { DecoderOptions(label: "Steno, " + $0.joined(separator: " "), arguments: PocketSphinxConfiguration.arguments(steno, setting: $0)) }
        if !settings.quick {
            candidates += [["-fwdflat", "no"], ["-maxhmmpf", "3000", "-maxwpf", "10", "-fwdflat", "no"],
                           ["-maxhmmpf", "10000", "-maxwpf", "20", "-fwdflat", "no"]]
                .map { DecoderOptions(label: $0.joined(separator: " "), arguments: $0) }
        }
        candidates += settings.extraOptionSets.map { DecoderOptions(label: $0.joined(separator: " "), arguments: $0) }
        let defaults = pocketSphinxDefaults()
        var seen: [[String: String]] = []
        return candidates.filter { candidate in
            let effective = defaults.merging(pairs(candidate.arguments)) { $1 }
            if seen.contains(effective) { return false }
            seen.append(effective)
            return true
        }
    }

    /// `-name value` pairs as a dictionary.
    func pairs(_ arguments: [String]) -> [String: String] {
        var result: [String: String] = [:]
        for index in stride(from: 0, to: arguments.count - 1, by: 2) { result[arguments[index]] = arguments[index + 1] }
        return result
    }

    /// Every decoder option's default value, as pocketsphinx declares it (`ps_args()`).
    func pocketSphinxDefaults() -> [String: String] {
        var result: [String: String] = [:]
        guard var argument = ps_args() else { return result }
        while let name = argument.pointee.name {
            if let value = argument.pointee.deflt { result[String(cString: name)] = String(cString: value) }
            argument += 1
        }
        return result
    }

    func options(_ files: [BenchFile]) throws {
        let sets = optionSets()
        progress("options: \(sets.count) option sets: " + sets.map(\.label).joined(separator: "; "))
        let engines = try sets.map { try PocketSphinxEngine(configuration: PocketSphinxConfiguration(arguments: $0.arguments)) }
        let block = PocketSphinxConfiguration().blockSamples
        let groups = files.map(\.group).reduce(into: [String]()) { if !$0.contains($1) { $0.append($1) } }
        let scored = groups.filter { group in files.contains { $0.group == group && $0.reference != nil } }

        // Fresh sessions, interleaved: for each file and repeat, every option set in turn, so
        // that the machine's load hits all sets alike; per file the least CPU counts, and per
        // call (the same calls every run: the words do not change) the least wall time.
        var cpu = [[Double]](repeating: [Double](repeating: .infinity, count: files.count), count: sets.count)
        var hypotheses = [[[Word]]](repeating: [[Word]](repeating: [], count: files.count), count: sets.count)
        var calls = [[[Call]]](repeating: [[Call]](repeating: [], count: files.count), count: sets.count)
        for (fileIndex, file) in files.enumerated() {
            // Progress, on standard error so that the tables stay as they are.
            progress("options: file \(fileIndex + 1) of \(files.count), \(file.name): \(sets.count) option sets × \(settings.repeats) runs")
            for repeatIndex in 0..<settings.repeats {
                for setIndex in sets.indices {
                    let run = try decodeTimed(file, engine: engines[setIndex], block: block)
                    cpu[setIndex][fileIndex] = min(cpu[setIndex][fileIndex], run.cpu)
                    if repeatIndex == 0 {
                        hypotheses[setIndex][fileIndex] = run.words
                        calls[setIndex][fileIndex] = run.calls
                    } else if run.calls.count == calls[setIndex][fileIndex].count {
                        for (index, call) in run.calls.enumerated() {
                            calls[setIndex][fileIndex][index].wall = min(calls[setIndex][fileIndex][index].wall, call.wall)
                            calls[setIndex][fileIndex][index].cpu = min(calls[setIndex][fileIndex][index].cpu, call.cpu)
                        }
                    }
                }
            }
        }

        let audio = files.reduce(0) { $0 + $1.seconds }
        print("Decoder options over \(files.count) files, \(f(audio, 1)) s of audio; fresh session per file, fed a \(block)-sample block per call")
        for group in groups {
            let members = files.filter { $0.group == group }
            let count = members.reduce(0) { $0 + words($1.reference ?? "").count }
            print("  \(group): \(members.count) files, \(f(members.reduce(0) { $0 + $1.seconds }, 1)) s"
                  + (count > 0 ? ", \(count) reference words (1 word = \(f(100 / Double(count), 1)) points)" : ", no reference"))
        }

        // Accuracy: deterministic, so the first run's words.
        var accuracyRows: [[String]] = []
        var calibration: (words: [Word], correct: [Bool]) = ([], [])
        let stenoIndex = sets.firstIndex { $0.arguments == PocketSphinxConfiguration.recommendedArguments } ?? 1
        var separation: [String] = []
        for setIndex in sets.indices {
            var row = [sets[setIndex].label]
            var all = (errors: 0, count: 0)
            var right: [Double] = []
            var wrong: [Double] = []
            for group in scored {
                var sum = (errors: 0, count: 0)
                for (fileIndex, file) in files.enumerated() where file.group == group {
                    guard let reference = file.reference else { continue }
                    let hypothesis = hypotheses[setIndex][fileIndex]
                    let alignment = align(reference: words(reference), hypothesis: hypothesis.map(\.text))
                    sum.errors += alignment.errors
                    sum.count += alignment.referenceCount
                    for (word, correct) in zip(hypothesis, alignment.hypothesisCorrect) {
                        if correct { right.append(word.confidence) } else { wrong.append(word.confidence) }
                    }
                    if setIndex == stenoIndex {
                        calibration.words += hypothesis
                        calibration.correct += alignment.hypothesisCorrect
                    }
                }
                row.append(pct(sum.errors, sum.count))
                all.errors += sum.errors
                all.count += sum.count
            }
            row.append("\(pct(all.errors, all.count)) (\(all.errors)/\(all.count))")
            if settings.oneSession {
                // Each group's files one after another in one session, as a live session
                // hears utterances (its cepstral mean carries over).
                var session = (errors: 0, count: 0)
                for group in scored {
                    let members = files.filter { $0.group == group && $0.reference != nil }
                    let perFile = try decodeInOneSession(members, engine: engines[setIndex]).perFile
                    for (file, hypothesis) in zip(members, perFile) {
                        let alignment = align(reference: words(file.reference ?? ""), hypothesis: hypothesis)
                        session.errors += alignment.errors
                        session.count += alignment.referenceCount
                    }
                }
                row.append("\(pct(session.errors, session.count)) (\(session.errors))")
            }
            // The files without a reference: words changed against pocketsphinx's defaults.
            var changed = (errors: 0, count: 0)
            for (fileIndex, file) in files.enumerated() where file.reference == nil {
                let alignment = align(reference: hypotheses[0][fileIndex].map(\.text), hypothesis: hypotheses[setIndex][fileIndex].map(\.text))
                changed.errors += alignment.errors
                changed.count += alignment.referenceCount
            }
            row.append(changed.count == 0 ? "-" : "\(changed.errors) of \(changed.count)")
            accuracyRows.append(row)
            separation.append(f(areaUnderCurve(right: right, wrong: wrong), 2))
        }

        // Cost: CPU, and the wall time of the calls that delivered a final, less the analysis
        // of the audio the call brought (the set's median wall time of a call that analyzed a
        // whole block and delivered no final): the end-of-utterance work (`ps_end_utt` with
        // the second pass, the lattice and best path, word posteriors), as a session waits for it.
        var costRows: [[String]] = []
        let defaultCPU = cpu[0].reduce(0, +)
        for setIndex in sets.indices {
            let all = calls[setIndex].flatMap { $0 }
            let blocks = all.filter { !$0.final && $0.samples == block }
            let blockWall = median(blocks.map(\.wall))
            let blockCPU = median(blocks.map(\.cpu))
            let finals = all.filter(\.final)
            let tails = finals.map { max(0, $0.wall - blockWall * Double($0.samples) / Double(block)) }.sorted()
            let tailsCPU = finals.map { max(0, $0.cpu - blockCPU * Double($0.samples) / Double(block)) }.sorted()
            let total = cpu[setIndex].reduce(0, +)
            costRows.append([sets[setIndex].label, f(total / audio, 3), f(total / defaultCPU, 2),
                             f(blockWall * 1000, 1), "\(tails.count)", ms(percentile(tails, 0.5)),
                             ms(percentile(tails, 0.95)), ms(tails.last ?? 0),
                             ms(percentile(tailsCPU, 0.5)), ms(percentile(tailsCPU, 0.95)), ms(tailsCPU.last ?? 0),
                             separation[setIndex]])
        }
        print("")
        print("Word error rate (substitutions + deletions + insertions / reference words), fresh sessions;")
        if settings.oneSession { print("1 session: each group's files in one session, finalized after each") }
        print("unreferenced: words changed against pocketsphinx's defaults, of their words")
        var header = ["options"] + scored + ["all"]
        if settings.oneSession { header.append("all, 1 session") }
        header.append("unreferenced")
        table(header, accuracyRows)
        print("")
        print("Cost: RTF and CPU over all files, best of \(settings.repeats) interleaved runs; end of utterance: wall time of the call")
        print("that delivered each final less its audio's share of a block call (best of \(settings.repeats) per call); conf AUC: how")
        print("often a right word's confidence beats a wrong word's (0.5: no better than chance)")
        print("(end CPU: the same, in the calls' thread CPU time)")
        table(["options", "RTF", "CPU vs defaults", "block call ms", "finals", "end p50", "end p95", "end max",
               "end CPU p50", "CPU p95", "CPU max", "conf AUC"], costRows)
        print("")
        calibrationTable(calibration.words, calibration.correct)
    }

    /// One recognizer call of `decodeTimed`: its wall and thread CPU time, the samples it
    /// analyzed, whether it delivered a final.
    struct Call {
        var wall: Double
        var cpu: Double
        var samples: Int
        var final: Bool
    }

    /// Decodes a file on a new recognizer (partial results on, as sessions run), `block`
    /// samples per `accept` so that every call analyzes one block, the recognizer's unit of
    /// work, then `finish()`; times each call. The timing is the bench's, around the public API.
    func decodeTimed(_ file: BenchFile, engine: PocketSphinxEngine, block: Int) throws -> (cpu: Double, words: [Word], calls: [Call]) {
        let recognizer = try engine.makePocketSphinxRecognizer()
        let floats = file.samples.map { Float($0) / 32768 }
        var calls: [Call] = []
        calls.reserveCapacity(floats.count / block + 2)
        var words: [Word] = []
        func timed(_ body: () throws -> [TranscriberEvent]) rethrows {
            let analyzed = recognizer.analyzedSeconds
            let start = monotonic()
            let startCPU = threadCPU()
            let events = try body()
            let cpu = threadCPU() - startCPU
            let wall = monotonic() - start
            let finals = events.compactMap { event -> RecognitionResult? in
                if case .final(let result) = event { return result } else { return nil }
            }
            words += finals.flatMap(\.words)
            let samples = Int(((recognizer.analyzedSeconds - analyzed) * 16000).rounded())
            calls.append(Call(wall: wall, cpu: cpu, samples: samples, final: !finals.isEmpty))
        }
        let start = threadCPU()
        try floats.withUnsafeBufferPointer { buffer in
            var offset = 0
            while offset < buffer.count {
                let end = min(buffer.count, offset + block)
                try timed { try recognizer.accept(UnsafeBufferPointer(rebasing: buffer[offset..<end])) }
                offset = end
            }
        }
        try timed { try recognizer.finish() }
        return (threadCPU() - start, words, calls)
    }

    /// Decodes files one after another in one session, `endUtterance()` after each; returns
    /// each file's words.
    func decodeInOneSession(_ files: [BenchFile], engine: PocketSphinxEngine) throws -> (cpu: Double, perFile: [[String]]) {
        let recognizer = try engine.makePocketSphinxRecognizer()
        var perFile: [[String]] = []
        let start = threadCPU()
        for file in files {
            var events = try feed(file.samples.map { Float($0) / 32768 }, to: recognizer)
            events += try recognizer.endUtterance()
            perFile.append(events.flatMap { event -> [String] in
                if case .final(let result) = event { return result.words.map(\.text) } else { return [] }
            })
        }
        _ = try recognizer.finish()
        return (threadCPU() - start, perFile)
    }

    /// How well confidences (word posteriors) separate right from wrong words (Steno's default).
    func calibrationTable(_ words: [Word], _ correct: [Bool]) {
        guard words.count == correct.count, !words.isEmpty else { return }
        let bands: [(String, ClosedRange<Double>)] = [
            ("0.00-0.25", 0...0.25), ("0.25-0.50", 0.25...0.5), ("0.50-0.75", 0.5...0.75), ("0.75-1.00", 0.75...1),
        ]
        var rows: [[String]] = []
        var seen = Set<Int>()
        for (label, band) in bands {
            var total = 0
            var right = 0
            for (index, word) in words.enumerated() where band.contains(word.confidence) && !seen.contains(index) {
                seen.insert(index)
                total += 1
                if correct[index] { right += 1 }
            }
            rows.append([label, "\(total)", total == 0 ? "-" : pct(right, total)])
        }
        let rightMean = zip(words, correct).filter { $0.1 }.map(\.0.confidence)
        let wrongMean = zip(words, correct).filter { !$0.1 }.map(\.0.confidence)
        print("Confidence (ps_seg_prob posterior) against correctness, Steno's default, fresh sessions, all referenced files")
        table(["confidence", "words", "correct"], rows)
        print("mean confidence: correct words \(f(mean(rightMean), 3)) (\(rightMean.count)), wrong words \(f(mean(wrongMean), 3)) (\(wrongMean.count))")
    }
}
