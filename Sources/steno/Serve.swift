enum Serve {
    static func run(_ arguments: [String]) -> Int32 {
        FileHandleOutput.stderr("steno serve: not yet\n")
        return 1
    }
}
