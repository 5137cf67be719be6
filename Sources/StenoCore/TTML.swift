/// TTML captions as IMSC 1.1 Text Profile documents that are also EBU-TT-D: media time base,
/// times `HH:MM:SS.mmm`, one region at the bottom, one style, each cue a `p` of `span`s with
/// a `br` between its lines. Written cue by cue: `header`, `paragraph`s, `footer`.
public enum TTML {
    /// The document up to its first cue. `language` is the BCP 47 tag of the captions'
    /// language ("" when it is not known).
    public static func header(language: String) -> String {
        """
        <?xml version="1.0" encoding="UTF-8"?>
        <tt xmlns="http://www.w3.org/ns/ttml" xmlns:ttp="http://www.w3.org/ns/ttml#parameter" \
        xmlns:tts="http://www.w3.org/ns/ttml#styling" xmlns:ttm="http://www.w3.org/ns/ttml#metadata" \
        xmlns:ebuttm="urn:ebu:tt:metadata" xmlns:ebutts="urn:ebu:tt:style" \
        ttp:timeBase="media" ttp:cellResolution="32 15" \
        ttp:contentProfiles="http://www.w3.org/ns/ttml/profile/imsc1.1/text" xml:lang="\(escaped(language))">
        <head>
        <styling>
        <style xml:id="caption" tts:fontFamily="proportionalSansSerif" tts:fontSize="100%" tts:lineHeight="125%" \
        tts:textAlign="center" tts:color="#FFFFFF" tts:backgroundColor="#000000C2" ebutts:linePadding="0.5c"/>
        </styling>
        <layout>
        <region xml:id="bottom" tts:origin="10% 10%" tts:extent="80% 80%" tts:displayAlign="after" tts:writingMode="lrtb"/>
        </layout>
        </head>
        <body>
        <div region="bottom" style="caption">

        """
    }

    /// One cue, `number` from 1 (its `xml:id` is `c` and the number).
    public static func paragraph(_ cue: CaptionCue, number: Int) -> String {
        let lines = cue.lines.map { "<span>" + escaped($0) + "</span>" }.joined(separator: "<br/>")
        return "<p xml:id=\"c\(number)\" begin=\"" + Captions.timestamp(cue.range.start, separator: ".") + "\" end=\""
            + Captions.timestamp(cue.range.end, separator: ".") + "\">" + lines + "</p>\n"
    }

    /// What follows the last cue.
    public static let footer = "</div>\n</body>\n</tt>\n"

    /// `text` with XML's five special characters as entities (and control characters, which
    /// XML 1.0 cannot carry, as spaces).
    static func escaped(_ text: String) -> String {
        var out = ""
        out.reserveCapacity(text.utf8.count)
        for scalar in text.unicodeScalars {
            switch scalar {
            case "&": out += "&amp;"
            case "<": out += "&lt;"
            case ">": out += "&gt;"
            case "\"": out += "&quot;"
            case "'": out += "&apos;"
            default:
                if scalar.value < 0x20 || (0xFFFE...0xFFFF).contains(scalar.value) {
                    out += " "
                } else {
                    out.unicodeScalars.append(scalar)
                }
            }
        }
        return out
    }
}
