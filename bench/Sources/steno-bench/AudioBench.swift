func runAudioBench(_ arguments: [String]) {
    print("audio benchmark: not written yet")
}
