@testable import CommandBusCLI
import Foundation
import Testing

/// How far a `--since`/`--until` time reaches: to the end of the instant it names, read at the
/// precision it is written in.
@Suite struct ReplayBoundTests {
    @Test(arguments: [
        ("2026-11-26T11:50:53.517Z", 0.001), ("2026-11-26T11:50:53Z", 1), ("2026-11-26T11:50:53.5Z", 0.1),
        ("2026-11-26T12:50:53.517+01:00", 0.001), ("2026-11-26T11:50:53+00:00", 1), ("1795693853", 1),
        ("1795693853.517", 0.001), ("1795693853.123456", 0.000_001),
    ])
    func aTimeReachesToTheEndOfItsLastDigit(text: String, width: Double) throws {
        let bound = try #require(ReplayBound(time: text))
        let start = try #require(bound.start), end = try #require(bound.end)
        // A Date near 2026 resolves about 0.2 µs, so a microsecond is read to a tenth.
        #expect(abs(end.timeIntervalSince(start) - width) < max(width / 1000, 1e-7), "\(text): \(end.timeIntervalSince(start))")
    }

    @Test func offsetsAndSecondsNameTheSameInstant() throws {
        let utc = try #require(ReplayBound(time: "2026-11-26T11:50:53.517Z"))
        let paris = try #require(ReplayBound(time: "2026-11-26T12:50:53.517+01:00"))
        #expect(utc == paris)
        #expect(abs(try #require(ReplayBound(time: "1.7e9")?.start).timeIntervalSince1970 - 1.7e9) < 1e-6)
    }

    @Test(arguments: ["yesterday", "2026-11-26T11:50", "1e400", "", "nan"])
    func whatIsNoTimeIsRefused(text: String) {
        #expect(ReplayBound(time: text) == nil)
    }

    /// Found by hand: `--since 2026-11-30T25:00:00Z` was taken (Foundation carried the hour into
    /// the next day) and listed nothing, and a date alone, ISO 8601 too, was refused.
    @Test(arguments: ["2026-11-30T25:00:00Z", "2026-11-31T10:00:00Z", "2026-02-29T00:00:00Z", "2026-13-01", "2026-02-29", "2026-11-30T12:60:00Z"])
    func aDayOrTimeThatDoesNotExistIsRefusedAndSaysSo(text: String) {
        #expect(ReplayBound(time: text) == nil)
        #expect(ReplayBound.fieldsWord(text).hasPrefix(": no such day"), "\(text)")
    }

    /// A date alone is that whole day in UTC; February 29 of a leap year is one.
    @Test func aDateAloneIsItsWholeDayInUTC() throws {
        let day = try #require(ReplayBound(time: "2028-02-29"))
        #expect(day.start == (try Date("2028-02-29T00:00:00Z", strategy: .iso8601)))
        #expect(day.end == (try Date("2028-03-01T00:00:00Z", strategy: .iso8601)))
        #expect(ReplayBound.fieldsWord("soon") == "" && ReplayBound.fieldsWord("2026-11-30T10:00:00Z") == "")
        // Ten digits are seconds since 1970, though their digits could be read as a year, a month and a day.
        let seconds = try #require(ReplayBound(time: "1700011001"))
        #expect(seconds.start == Date(timeIntervalSince1970: 1_700_011_001))
    }
}
