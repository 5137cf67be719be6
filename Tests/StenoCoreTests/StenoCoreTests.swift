import Testing
@testable import StenoCore

@Test func placeholder() {}
