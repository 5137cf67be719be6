import Testing
@testable import StenoSpeech

@Test func placeholder() {}
