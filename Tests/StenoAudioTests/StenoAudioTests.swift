import Testing
@testable import StenoAudio

@Test func placeholder() {}
