import Testing
@testable import StenoCore

@Suite struct CoreMathTests {
    @Test func nearestRoundsHalvesAwayFromZero() {
        #expect(CoreMath.nearest(2.5) == 3)
        #expect(CoreMath.nearest(-2.5) == -3)
        #expect(CoreMath.nearest(2.4999) == 2)
        #expect(CoreMath.nearest(-0.4) == 0)
        #expect(CoreMath.nearest(1e17) == 100_000_000_000_000_000)
        #expect(CoreMath.nearest(.nan) == nil)
        #expect(CoreMath.nearest(1e19) == nil)
    }

    @Test func floorAndIntegers() {
        #expect(CoreMath.floor(1.9) == 1)
        #expect(CoreMath.floor(-1.1) == -2)
        #expect(CoreMath.floor(-2) == -2)
        #expect(CoreMath.exactInteger(16000) == 16000)
        #expect(CoreMath.exactInteger(16000.5) == nil)
        #expect(CoreMath.isIntegral(1e30))
        #expect(!CoreMath.isIntegral(0.5))
        #expect(!CoreMath.isIntegral(.infinity))
    }
}
