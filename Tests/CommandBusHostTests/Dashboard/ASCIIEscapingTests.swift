import CommandBusDashboard
import CommandBusSupport
import Testing

/// The escaping behind Prometheus labels, HTML, DOT and Mermaid: byte by byte, so a reserved
/// character is replaced even where it starts a grapheme cluster.
@Suite struct ASCIIEscapingTests {
    let labels = ASCIIEscaping(["\\": "\\\\", "\"": "\\\"", "\n": "\\n"])

    @Test func textWithNothingToReplaceComesBackAsItIs() {
        for text in ["", "greet", "Grüße, 世界 ✓ 👩‍👩‍👧", "cmdbus_command_duration_seconds"] {
            #expect(labels(text) == text)
        }
    }

    @Test func eachReservedCharacterIsReplaced() {
        #expect(labels(#"a"b\c"#) == #"a\"b\\c"#)
        #expect(labels("line\nnext") == #"line\nnext"#)
        #expect(labels("\"\"\n") == #"\"\"\n"#)
    }

    /// `Character`-wise escaping missed all three: each is one grapheme cluster equal to neither
    /// `"` nor `\n`, yet its first byte ends a quoted value or a line.
    @Test func aReservedCharacterThatStartsAGraphemeClusterIsStillReplaced() {
        #expect(labels("\"\u{301}") == "\\\"\u{301}")
        #expect(labels("a\r\nb") == "a\r\\nb")
        #expect(labels("\n\u{20DD}") == "\\n\u{20DD}")
        #expect(!DashboardAssets.htmlEscaped("x\"\u{301} onmouseover=alert(1)").contains("\""))
    }

    @Test func nonASCIITextAroundAReplacementStaysWhole() {
        #expect(labels("é\"ü") == "é\\\"ü")
        #expect(labels("👩‍👩‍👧\\日本") == "👩‍👩‍👧\\\\日本")
    }

    /// Against a reference that replaces Unicode scalars: the same thing for ASCII keys.
    @Test func agreesWithScalarReplacementOnRandomText() {
        let pieces = ["a", "Z", "\"", "\\", "\n", "\r\n", "\u{301}", "é", "日", "👩‍👩‍👧", " ", "<", "&"]
        let html: [Unicode.Scalar: String] = ["&": "&amp;", "<": "&lt;", ">": "&gt;", "\"": "&quot;", "'": "&#39;"]
        let escaping = ASCIIEscaping(html)
        // A fixed linear congruential sequence: every run tests the same 2,000 texts.
        var state: UInt32 = 0x5EED
        func next(_ bound: Int) -> Int {
            state = state &* 1_103_515_245 &+ 12_345
            return Int(state >> 16) % bound
        }
        for _ in 0..<2_000 {
            let text = (0..<next(24)).map { _ in pieces[next(pieces.count)] }.joined()
            var expected = ""
            for scalar in text.unicodeScalars { if let replacement = html[scalar] { expected += replacement } else { expected.unicodeScalars.append(scalar) } }
            #expect(escaping(text) == expected, "\(text.debugDescription)")
        }
    }

    @Test func aHistogramEscapesItsLabelsOnceAndWritesEveryBucket() {
        var histogram = CommandMetrics.Histogram()
        histogram.counts[0] = 2
        histogram.counts[CommandMetrics.bucketBounds.count] = 1
        histogram.sum = 90.5
        histogram.count = 3
        var text = PrometheusText()
        text.histogram("cmdbus_x", [("command", "a\"b\r\nc")], histogram)
        let lines = text.text.split(separator: "\n", omittingEmptySubsequences: false).dropLast().map(String.init)
        #expect(lines.count == CommandMetrics.bucketBounds.count + 3)
        #expect(lines.first == #"cmdbus_x_bucket{command="a\"b"# + "\r" + #"\nc",le="0.0005"} 2"#)
        #expect(lines.contains(#"cmdbus_x_bucket{command="a\"b"# + "\r" + #"\nc",le="60"} 2"#))
        #expect(lines.contains(#"cmdbus_x_bucket{command="a\"b"# + "\r" + #"\nc",le="+Inf"} 3"#))
        #expect(lines.contains(#"cmdbus_x_sum{command="a\"b"# + "\r" + #"\nc"} 90.5"#))
        #expect(lines.last == #"cmdbus_x_count{command="a\"b"# + "\r" + #"\nc"} 3"#)
    }
}
