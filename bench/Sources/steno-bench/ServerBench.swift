func runServerBench(_ arguments: [String]) {
    print("server benchmark: not written yet")
}
