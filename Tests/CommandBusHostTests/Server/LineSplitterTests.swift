import CommandBusServer
import Testing

/// The server's request loop reads whatever a socket has and cuts it into lines here.
struct LineSplitterTests {
    private func lines(_ chunks: [String], limit: Int = 1_000) -> [String] {
        var splitter = LineSplitter(limit: limit)
        var out: [String] = []
        for chunk in chunks {
            Array(chunk.utf8).withUnsafeBytes { splitter.append($0) }
            while let line = splitter.next() {
                switch line {
                case .text(let bytes): out.append(String(decoding: bytes, as: UTF8.self))
                case .tooLong(let count): out.append("<too long: \(count)>")
                }
            }
        }
        return out
    }

    @Test func linesArriveWholeHoweverTheBytesAreCut() {
        #expect(lines(["a\nb", "c\n", "", "\n", "d"]) == ["a", "bc", ""])
        #expect(lines(["{\"op\":", "\"status\"}\r\n"]) == ["{\"op\":\"status\"}\r"])
        let text = (0..<500).map { "line \($0)\n" }.joined()
        let bytes = Array(text.utf8)
        let cuts = stride(from: 0, to: bytes.count, by: 7).map { String(decoding: bytes[$0..<min($0 + 7, bytes.count)], as: UTF8.self) }
        #expect(lines(cuts) == (0..<500).map { "line \($0)" })
    }

    @Test func aLineOverTheLimitIsCountedAndSkippedAndTheNextOneIsRead() {
        let long = String(repeating: "x", count: 250)
        #expect(lines([long, long, long + "\nnext\n"], limit: 100) == ["<too long: 750>", "next"])
        #expect(lines([long + "\n" + "ok\n"], limit: 100) == ["<too long: 250>", "ok"])
    }

    /// Many lines in one burst, then more: taken lines are dropped in bulk, nothing is lost.
    @Test func aLongBurstOfShortLinesKeepsEveryLineInOrder() {
        let burst = (0..<20_000).map { "\($0)\n" }.joined()
        let more = (20_000..<20_010).map { "\($0)\n" }.joined()
        #expect(lines([burst, more], limit: 1 << 20) == (0..<20_010).map(String.init))
    }

    /// At the end of the stream, what follows the last newline is a line too, and an over-long one is counted.
    @Test func theStreamsEndGivesUpALastLineWithoutItsNewline() {
        var splitter = LineSplitter(limit: 10)
        Array("a\n{\"op\":1}".utf8).withUnsafeBytes { splitter.append($0) }
        #expect(text(splitter.next()) == "a" && splitter.next() == nil)
        #expect(text(splitter.finish()) == "{\"op\":1}")
        #expect(splitter.finish() == nil)
        Array("abc\n".utf8).withUnsafeBytes { splitter.append($0) }
        _ = splitter.next()
        #expect(splitter.finish() == nil, "nothing follows the last newline")
        Array(String(repeating: "x", count: 25).utf8).withUnsafeBytes { splitter.append($0) }
        _ = splitter.next()
        guard case .tooLong(25) = splitter.finish() else { Issue.record("an over-long last line is counted"); return }
    }

    private func text(_ line: LineSplitter.Line?) -> String? {
        guard case .text(let bytes) = line else { return nil }
        return String(decoding: bytes, as: UTF8.self)
    }
}
