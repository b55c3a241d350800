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

    /// A bound at a time written as `text` (ISO 8601 or seconds since 1970), or nil if it is
    /// neither. A date alone (`2026-11-30`) is that day in UTC, as the journal prints its times;
    /// a time whose fields are out of range (`T25:00`, `02-30`) is none, where Foundation's
    /// parser carried it into the next hour or month.
    init?(time text: String) {
        if let day = Self.utcDay(text) {
            (start, end) = (day, day.addingTimeInterval(86_400))
            return
        }
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
        } else if Self.fieldsAreInRange(text), let parsed = try? Date(text, strategy: .iso8601) {
            date = parsed
            fraction = Self.isoFraction(text)
        } else {
            return nil
        }
        let digits = min(fraction.map { $0.prefix(while: \.isNumber).count } ?? 0, 9)
        start = date
        end = date.addingTimeInterval(pow(10, -Double(digits)))
    }

    /// The start of the UTC day `text` names as `YYYY-MM-DD`, or nil if it is not one that exists.
    private static func utcDay(_ text: String) -> Date? {
        guard text.utf8.count == 10, fieldsAreInRange(text + "T00:00:00Z") else { return nil }
        return try? Date(text + "T00:00:00Z", strategy: .iso8601)
    }

    /// Whether an ISO 8601 time's date and clock (`YYYY-MM-DDTHH:MM:SS`, the first 19 characters)
    /// name a day that exists and an hour, minute and second that do: 1 to 12, 1 to the month's
    /// last day, 0 to 23, 0 to 59, 0 to 60 (a leap second).
    static func fieldsAreInRange(_ text: String) -> Bool {
        guard let fields = dateAndClock(text), (1...12).contains(fields.month) else { return false }
        let leap = fields.year % 4 == 0 && (fields.year % 100 != 0 || fields.year % 400 == 0)
        let lastDay = [31, leap ? 29 : 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31][fields.month - 1]
        return (1...lastDay).contains(fields.day) && (0...23).contains(fields.hour) && (0...59).contains(fields.minute)
            && (0...60).contains(fields.second)
    }

    /// The numbers of `YYYY-MM-DDTHH:MM:SS` (`T`, `t` or a space between), the first 19
    /// characters of `text`, whatever their values; `nil` if they are not written so. The
    /// separators are read too: ten digits of seconds since 1970 are no date.
    private static func dateAndClock(_ text: String) -> (year: Int, month: Int, day: Int, hour: Int, minute: Int, second: Int)? {
        let characters = Array(text.utf8.prefix(19))
        guard characters.count == 19, characters[4] == UInt8(ascii: "-"), characters[7] == UInt8(ascii: "-"),
              [UInt8(ascii: "T"), UInt8(ascii: "t"), UInt8(ascii: " ")].contains(characters[10]),
              characters[13] == UInt8(ascii: ":"), characters[16] == UInt8(ascii: ":") else { return nil }
        func number(_ range: Range<Int>) -> Int? {
            let digits = characters[range]
            guard digits.allSatisfy({ $0 >= UInt8(ascii: "0") && $0 <= UInt8(ascii: "9") }) else { return nil }
            return digits.reduce(0) { $0 * 10 + Int($1 - UInt8(ascii: "0")) }
        }
        guard let year = number(0..<4), let month = number(5..<7), let day = number(8..<10),
              let hour = number(11..<13), let minute = number(14..<16), let second = number(17..<19) else { return nil }
        return (year, month, day, hour, minute, second)
    }

    /// What follows a refusal of `text`: for one written as an ISO 8601 time or date whose
    /// fields are out of range, which day or clock does not exist; else nothing.
    static func fieldsWord(_ text: String) -> String {
        let clock = text.utf8.count == 10 ? text + "T00:00:00Z" : text
        guard dateAndClock(clock) != nil, !fieldsAreInRange(clock) else { return "" }
        return ": no such \(text.utf8.count == 10 ? "day" : "day or time") (a month runs 1 to 12, a day to the month's last, an hour 0 to 23, a minute 0 to 59)"
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
