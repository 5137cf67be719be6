func runSpeechBench(_ arguments: [String]) {
    print("speech benchmark: not written yet")
}
