import CommandBus
import Foundation

/// A `--since` or `--until` bound of `journal replay`: an entry (by id) or a time.
///
/// A time covers all of the instant it names at the precision it is written in: `--until
/// 2026-11-26T11:50:53.517Z` takes what was created in that millisecond, and `--until …:53Z` the
/// whole second. The journal keeps more digits than it prints, so a bound taken to the printed
/// digits alone would leave out the very entry whose time was copied from `journal list --json`.
struct ReplayBound: Equatable {
    /// The entry's number, for a bound given as an entry id.
    var sequence: Int64?
    /// The first instant the time names.
    var start: Date?
    /// The first instant after it.
    var end: Date?

    /// A bound at an entry.
    init(sequence: Int64) { self.sequence = sequence }

    /// A bound at a time written as `text` (ISO 8601 or seconds since 1970), or nil if it is neither.
    init?(time text: String) {
        let date: Date
        let fraction: Substring?
        if let seconds = Double(text), seconds.isFinite {
            guard !text.contains(where: { $0 == "e" || $0 == "E" }) else {
                // 1.7e9 has no precision to read; it names that instant alone.
                (start, end) = (Date(timeIntervalSince1970: seconds), Date(timeIntervalSince1970: seconds.nextUp))
                return
            }
            date = Date(timeIntervalSince1970: seconds)
            fraction = text.split(separator: ".", maxSplits: 1).dropFirst().first
        } else if let parsed = try? Date(text, strategy: .iso8601) {
            date = parsed
            fraction = Self.isoFraction(text)
        } else {
            return nil
        }
        let digits = min(fraction.map { $0.prefix(while: \.isNumber).count } ?? 0, 9)
        start = date
        end = date.addingTimeInterval(pow(10, -Double(digits)))
    }

    /// The digits after the seconds of an ISO 8601 time (`…T11:50:53.517Z` → `517…`), if any.
    private static func isoFraction(_ text: String) -> Substring? {
        guard let time = text.firstIndex(where: { $0 == "T" || $0 == "t" || $0 == " " }) else { return nil }
        let clock = text[text.index(after: time)...]
        guard clock.count > 8 else { return nil }
        let afterSeconds = clock.dropFirst(8)
        guard let mark = afterSeconds.first, mark == "." || mark == "," else { return nil }
        return afterSeconds.dropFirst()
    }
}
