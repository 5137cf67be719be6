import Testing
@testable import StenoServer

@Test func placeholder() {}
