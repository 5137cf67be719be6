import Testing
import StenoSpeech

/// `PocketSphinxConfiguration.arguments(setting:)`: the one rule for changing decoder options
/// (`steno --decoder`, `steno-bench speech --only options`). Nothing is loaded.
@Suite struct DecoderArgumentsTests {
    @Test func anOptionAlreadySetIsReplacedInPlaceAndNewOnesFollow() {
        let base = ["-maxhmmpf", "5000", "-maxwpf", "20", "-fwdflat", "no"]
        #expect(PocketSphinxConfiguration.arguments(base, setting: ["-maxwpf", "10", "-topn", "2", "-bestpath", "no"])
            == ["-maxhmmpf", "5000", "-maxwpf", "10", "-fwdflat", "no", "-topn", "2", "-bestpath", "no"])
        #expect(PocketSphinxConfiguration.arguments(base, setting: []) == base)
        #expect(PocketSphinxConfiguration.arguments([], setting: ["-fwdflat", "yes"]) == ["-fwdflat", "yes"])
    }

    /// pocketsphinx refuses an option given twice: however often `changes` names one, the result
    /// names it once, with the last value.
    @Test func noOptionIsGivenTwiceAndTheLastValueWins() {
        let merged = PocketSphinxConfiguration.arguments(["-fwdflat", "no"],
                                                         setting: ["-topn", "2", "-fwdflat", "yes", "-topn", "3", "-fwdflat", "no"])
        #expect(merged == ["-fwdflat", "no", "-topn", "3"])
    }

    @Test func theDefaultBaseIsStenosOwnOptions() {
        #expect(PocketSphinxConfiguration.arguments(setting: []) == PocketSphinxConfiguration.recommendedArguments)
        let changed = PocketSphinxConfiguration.arguments(setting: ["-fwdflat", "yes"])
        #expect(changed.count == PocketSphinxConfiguration.recommendedArguments.count)
        #expect(changed.firstIndex(of: "-fwdflat").map { changed[$0 + 1] } == "yes")
    }

    /// A name left without a value at the end is passed over, not paired with nothing.
    @Test func aTrailingNameWithoutAValueIsPassedOver() {
        #expect(PocketSphinxConfiguration.arguments(["-maxwpf", "20"], setting: ["-maxwpf", "10", "-topn"])
            == ["-maxwpf", "10"])
    }
}
