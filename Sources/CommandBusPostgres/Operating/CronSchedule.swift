import CommandBusSupport
// Foundation, not FoundationEssentials alone: time zones need its ICU data, which `cmdbus` links already.
import Foundation

/// A five-field cron expression (`minute hour day-of-month month day-of-week`), read in UTC, as
/// `crontab(5)` reads one: `*`, numbers, ranges (`1-5`), steps (`*/15`, `0-30/10`, `5/20`),
/// lists of these (`1,15,30`), month and weekday names (`JAN`, `mon-fri`; weekday 0 and 7 are
/// Sunday), and the macros `@hourly`, `@daily` (`@midnight`), `@weekly`, `@monthly` and
/// `@yearly` (`@annually`). As in cron, where both day fields are restricted a day matching
/// either runs it (`0 0 1 * MON`: the first of the month, and every Monday).
///
/// The fields are read in UTC unless the expression starts with `CRON_TZ=ZONE` (or `TZ=ZONE`),
/// an IANA time zone, as cronie reads one: `CRON_TZ=Europe/Paris 0 9 * * MON-FRI`. Where a
/// change of clocks skips a local time, a slot at that time comes as much later as the clocks
/// skipped (02:30, on the night clocks go from 02:00 to 03:00, comes at 03:30); a local time
/// that happens twice, as clocks go back, comes once, the first time.
///
/// Times are seconds since 1970 (UTC); the arithmetic is the proleptic Gregorian calendar's, so
/// no host's own time zone or clock enters it: the database's clock says when it is.
package struct CronSchedule: Sendable, Equatable {
    /// The expression as given (with its `CRON_TZ=` prefix; a macro stays a macro).
    package let text: String
    /// The expression without its time zone prefix.
    package let expression: String
    /// The time zone the fields are read in: `nil` for UTC.
    private let zone: TimeZone?
    /// The time zone's name, `UTC` without one.
    package var zoneName: String { zone?.identifier ?? "UTC" }
    private let minutes: UInt64, hours: UInt64, days: UInt64, months: UInt64, weekdays: UInt64
    /// The day fields began with `*`: the other alone picks the days.
    private let everyDay: Bool, everyWeekday: Bool

    /// Why a cron expression was refused, in one line that quotes it.
    package struct Problem: Error, Sendable, Equatable {
        /// What is wrong and what to write instead.
        package var message: String

        package init(message: String) { self.message = message }
    }

    private static let macros = [
        "@yearly": "0 0 1 1 *", "@annually": "0 0 1 1 *", "@monthly": "0 0 1 * *", "@weekly": "0 0 * * 0",
        "@daily": "0 0 * * *", "@midnight": "0 0 * * *", "@hourly": "0 * * * *",
    ]
    private static let monthNames = ["JAN", "FEB", "MAR", "APR", "MAY", "JUN", "JUL", "AUG", "SEP", "OCT", "NOV", "DEC"]
    private static let weekdayNames = ["SUN", "MON", "TUE", "WED", "THU", "FRI", "SAT"]

    /// Reads `text`.
    /// - Throws: A ``Problem`` naming the field and what is wrong with it, or saying that the
    ///   expression names no time that exists (`0 0 30 2 *`).
    package init(parsing text: String) throws(Problem) {
        let whole = text.trimmingWhitespace
        self.text = whole
        var trimmed = whole
        var zone: TimeZone?
        if let prefix = ["CRON_TZ=", "TZ="].first(where: whole.hasPrefix) {
            let rest = whole.dropFirst(prefix.count)
            let name = String(rest.prefix { !$0.isWhitespace })
            zone = name.isEmpty ? nil : TimeZone(identifier: name)
            guard zone != nil else {
                throw Problem(message: "cron \(quoted(whole)) names the time zone \(quoted(name)), which is not one; give an IANA name such as Europe/Paris, America/New_York or UTC")
            }
            trimmed = String(rest.dropFirst(name.count)).trimmingWhitespace
        }
        self.zone = zone
        expression = trimmed
        let expanded: String
        if trimmed.hasPrefix("@") {
            guard let macro = Self.macros[trimmed.lowercased()] else {
                throw Problem(message: "cron \(quoted(trimmed)) is not one of @hourly, @daily, @weekly, @monthly, @yearly; or give five fields, as '0 3 * * *'")
            }
            expanded = macro
        } else {
            expanded = trimmed
        }
        let fields = expanded.split(whereSeparator: { $0 == " " || $0 == "\t" }).map(String.init)
        guard fields.count == 5 else {
            throw Problem(message: "cron \(quoted(trimmed)) has \(fields.count) field\(fields.count == 1 ? "" : "s"); give five: minute hour day-of-month month day-of-week, as '0 3 * * *' (UTC)")
        }
        func field(_ index: Int, _ name: String, _ range: ClosedRange<Int>, names: [String] = [], nameBase: Int = 0) throws(Problem) -> UInt64 {
            try Self.parse(fields[index], name: name, range: range, names: names, nameBase: nameBase, expression: trimmed)
        }
        minutes = try field(0, "minute", 0...59)
        hours = try field(1, "hour", 0...23)
        days = try field(2, "day of month", 1...31)
        months = try field(3, "month", 1...12, names: Self.monthNames, nameBase: 1)
        // 7 is Sunday as 0 is.
        let week = try field(4, "day of week", 0...7, names: Self.weekdayNames)
        weekdays = (week | (week >> 7)) & 0x7F
        everyDay = fields[2].hasPrefix("*")
        everyWeekday = fields[4].hasPrefix("*")
        guard nextWallTime(after: 0) != nil else {
            throw Problem(message: "cron \(quoted(trimmed)) names no day that exists (as the 30th of February); check the day-of-month and month fields")
        }
    }

    /// One field as a bit set over its range.
    private static func parse(
        _ field: String, name: String, range: ClosedRange<Int>, names: [String], nameBase: Int, expression: String
    ) throws(Problem) -> UInt64 {
        func problem(_ what: String) -> Problem {
            Problem(message: "cron \(quoted(expression)): the \(name) field \(quoted(field)) \(what)")
        }
        func value(_ text: Substring) throws(Problem) -> Int {
            if let index = names.firstIndex(of: text.uppercased()) { return index + nameBase }
            guard let number = Int(text), range.contains(number) else {
                let known = names.isEmpty ? "" : " or a name (\(names[0])-\(names[names.count - 1]))"
                throw problem("has \(quoted(String(text))), not a number from \(range.lowerBound) to \(range.upperBound)\(known)")
            }
            return number
        }
        var bits: UInt64 = 0
        for part in field.split(separator: ",", omittingEmptySubsequences: false) {
            guard !part.isEmpty else { throw problem("has an empty item in its list; separate values with single commas") }
            let pieces = part.split(separator: "/", omittingEmptySubsequences: false)
            guard pieces.count <= 2 else { throw problem("has more than one '/' in \(quoted(String(part)))") }
            var step = 1
            if pieces.count == 2 {
                guard let number = Int(pieces[1]), number > 0 else { throw problem("has step \(quoted(String(pieces[1]))); a step is a whole number of at least 1") }
                step = number
            }
            let lower: Int, upper: Int
            if pieces[0] == "*" {
                (lower, upper) = (range.lowerBound, range.upperBound)
            } else if let dash = pieces[0].firstIndex(of: "-") {
                lower = try value(pieces[0][..<dash])
                upper = try value(pieces[0][pieces[0].index(after: dash)...])
                guard lower <= upper else { throw problem("has the range \(quoted(String(pieces[0]))), which runs backwards; write it low to high, or as two ranges") }
            } else {
                lower = try value(pieces[0])
                // `5/20`: from 5 to the end in steps of 20, as cron reads it.
                upper = pieces.count == 2 ? range.upperBound : lower
            }
            for number in stride(from: lower, through: upper, by: step) { bits |= 1 << UInt64(number) }
        }
        return bits
    }

    /// The first minute strictly after `seconds` (seconds since 1970, UTC) that the expression
    /// names in its time zone, as seconds since 1970; `nil` if none comes within eight years (no
    /// leap day is further apart), which only an expression naming no real day gives.
    package func next(after seconds: Int64) -> Int64? {
        guard let zone else { return nextWallTime(after: seconds) }
        func offset(_ time: Int64) -> Int64 { Int64(zone.secondsFromGMT(for: Date(timeIntervalSince1970: Double(time)))) }
        // Walk the zone's wall clock (as if it were UTC) from now's, and turn each time it names
        // into the instants that show it: none in a gap, two where clocks go back.
        var wall = seconds + offset(seconds)
        for _ in 0..<1000 {
            guard let next = nextWallTime(after: wall) else { return nil }
            wall = next
            let offsets = Set([offset(wall - 86_400), offset(wall + 86_400), offset(wall)])
            let instants = offsets.map { wall - $0 }.filter { $0 + offset($0) == wall }.sorted()
            // In a gap, the moment clocks skip to: the wall time less the offset from before it.
            let instant = instants.first { $0 > seconds } ?? (instants.isEmpty ? wall - (offsets.min() ?? 0) : nil)
            if let instant, instant > seconds { return instant }
        }
        return nil
    }

    /// ``next(after:)`` on a wall clock that reads as UTC does.
    private func nextWallTime(after seconds: Int64) -> Int64? {
        var minute = Self.floorDivide(seconds, 60) + 1
        let lastDay = Self.floorDivide(minute, 1440) + 8 * 366
        while Self.floorDivide(minute, 1440) <= lastDay {
            let day = Self.floorDivide(minute, 1440)
            let (year, month, dayOfMonth) = Self.civil(day)
            if months & (1 << UInt64(month)) == 0 {
                minute = Self.days(year: month == 12 ? year + 1 : year, month: month == 12 ? 1 : month + 1, day: 1) * 1440
                continue
            }
            let weekday = Int(((day + 4) % 7 + 7) % 7)  // 1970-01-01 was a Thursday; 0 is Sunday
            if !matches(dayOfMonth: dayOfMonth, weekday: weekday) {
                minute = (day + 1) * 1440
                continue
            }
            let ofDay = Int(minute - day * 1440)
            if hours & (1 << UInt64(ofDay / 60)) == 0 {
                minute = day * 1440 + Int64(ofDay / 60 + 1) * 60
                continue
            }
            if minutes & (1 << UInt64(ofDay % 60)) == 0 {
                minute += 1
                continue
            }
            return minute * 60
        }
        return nil
    }

    private func matches(dayOfMonth: Int, weekday: Int) -> Bool {
        let byDay = days & (1 << UInt64(dayOfMonth)) != 0, byWeekday = weekdays & (1 << UInt64(weekday)) != 0
        switch (everyDay, everyWeekday) {
        case (true, true): return true
        case (true, false): return byWeekday
        case (false, true): return byDay
        case (false, false): return byDay || byWeekday
        }
    }

    /// `value / divisor`, rounded down where `/` rounds toward zero (a time before 1970).
    static func floorDivide(_ value: Int64, _ divisor: Int64) -> Int64 {
        value >= 0 ? value / divisor : -((-value + divisor - 1) / divisor)
    }

    /// The year, month and day of `days` since 1970-01-01 (Howard Hinnant's `civil_from_days`).
    private static func civil(_ days: Int64) -> (year: Int64, month: Int, day: Int) {
        let z = days + 719_468
        let era = floorDivide(z, 146_097)
        let dayOfEra = z - era * 146_097
        let yearOfEra = (dayOfEra - dayOfEra / 1460 + dayOfEra / 36524 - dayOfEra / 146_096) / 365
        let dayOfYear = dayOfEra - (365 * yearOfEra + yearOfEra / 4 - yearOfEra / 100)
        let shifted = (5 * dayOfYear + 2) / 153
        let day = Int(dayOfYear - (153 * shifted + 2) / 5 + 1)
        let month = Int(shifted < 10 ? shifted + 3 : shifted - 9)
        return (yearOfEra + era * 400 + (month <= 2 ? 1 : 0), month, day)
    }

    /// Days since 1970-01-01 of a date (Howard Hinnant's `days_from_civil`).
    private static func days(year: Int64, month: Int, day: Int) -> Int64 {
        let year = month <= 2 ? year - 1 : year
        let era = floorDivide(year, 400)
        let yearOfEra = year - era * 400
        let dayOfYear = Int64((153 * (month > 2 ? month - 3 : month + 9) + 2) / 5 + day - 1)
        let dayOfEra = yearOfEra * 365 + yearOfEra / 4 - yearOfEra / 100 + dayOfYear
        return era * 146_097 + dayOfEra - 719_468
    }
}

private extension String {
    var trimmingWhitespace: String {
        String(drop(while: \.isWhitespace).reversed().drop(while: \.isWhitespace).reversed())
    }
}
