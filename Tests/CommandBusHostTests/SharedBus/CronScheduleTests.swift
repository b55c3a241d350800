import CommandBusPostgres
import Foundation
import Testing

/// `bus periodic --cron`: the expression's next minute, against known dates and against a
/// minute-by-minute scan with Foundation's calendar; and each way of writing one wrong, refused
/// in a line that says what to write.
struct CronScheduleTests {
    /// Seconds since 1970 of a UTC time written `2026-11-27T09:00`.
    private static func at(_ text: String) -> Int64 {
        let style = Date.ISO8601FormatStyle(timeZone: TimeZone(identifier: "UTC")!)
        return Int64(try! style.parse(text + ":00Z").timeIntervalSince1970)
    }

    private static func next(_ expression: String, after time: String) throws -> String? {
        let schedule = try CronSchedule(parsing: expression)
        return schedule.next(after: at(time)).map {
            String(Date(timeIntervalSince1970: Double($0)).formatted(.iso8601).dropLast(4))
        }
    }

    @Test(arguments: [
        ("*/15 * * * *", "2026-11-27T10:07", "2026-11-27T10:15"),
        ("*/15 * * * *", "2026-11-27T10:45", "2026-11-27T11:00"),
        ("0 3 * * *", "2026-11-27T03:00", "2026-11-28T03:00"),
        ("0 3 * * *", "2026-11-27T02:59", "2026-11-27T03:00"),
        // Friday 27 November 2026: the next weekday morning is Monday's.
        ("0 9 * * MON-FRI", "2026-11-27T09:00", "2026-11-30T09:00"),
        ("0 9 * * mon-fri", "2026-11-27T08:00", "2026-11-27T09:00"),
        // 7 is Sunday, as 0 is.
        ("30 6 * * 7", "2026-11-27T00:00", "2026-11-29T06:30"),
        ("30 6 * * SUN", "2026-11-27T00:00", "2026-11-29T06:30"),
        // Both day fields restricted: either day runs it (Friday 4 December comes before the 13th).
        ("0 0 13 * FRI", "2026-11-28T00:00", "2026-12-04T00:00"),
        // One restricted, the other `*`: that one alone.
        ("0 0 13 * *", "2026-11-28T00:00", "2026-12-13T00:00"),
        ("0 0 29 2 *", "2025-03-01T00:00", "2028-02-29T00:00"),
        ("0 0 29 FEB *", "2096-03-01T00:00", "2104-02-29T00:00"),
        ("59 23 31 12 *", "2026-12-31T23:59", "2027-12-31T23:59"),
        ("@monthly", "2026-12-15T12:00", "2027-01-01T00:00"),
        ("@yearly", "2026-06-01T00:00", "2027-01-01T00:00"),
        ("@weekly", "2026-11-27T00:00", "2026-11-29T00:00"),
        ("@hourly", "2026-11-27T10:00", "2026-11-27T11:00"),
        ("5/20 * * * *", "2026-11-27T10:26", "2026-11-27T10:45"),
        ("0-30/10 8,17 * * *", "2026-11-27T08:31", "2026-11-27T17:00"),
        ("0 12 1,15 JAN-MAR,DEC *", "2026-11-27T00:00", "2026-12-01T12:00"),
        ("  0 12 * * *  ", "2026-11-27T00:00", "2026-11-27T12:00"),
        // In a time zone: Paris is UTC+1 in winter, +2 in summer; Kolkata +5:30.
        ("CRON_TZ=Europe/Paris 0 9 * * *", "2026-11-27T00:00", "2026-11-27T08:00"),
        ("TZ=Europe/Paris 0 9 * * *", "2026-07-01T00:00", "2026-07-01T07:00"),
        ("CRON_TZ=Asia/Kolkata 0 9 * * MON-FRI", "2026-11-27T04:00", "2026-11-30T03:30"),
        ("CRON_TZ=America/New_York @daily", "2026-11-27T06:00", "2026-11-28T05:00"),
        // Clocks forward in Paris at 01:00 UTC on 28 March 2027 (02:00 becomes 03:00): 02:30 that
        // night comes an hour late, at 03:30 (01:30 UTC); the next night's at 02:30 (00:30 UTC).
        ("CRON_TZ=Europe/Paris 30 2 * * *", "2027-03-27T12:00", "2027-03-28T01:30"),
        ("CRON_TZ=Europe/Paris 30 2 * * *", "2027-03-28T01:30", "2027-03-29T00:30"),
        // Clocks back at 01:00 UTC on 25 October 2026 (03:00 becomes 02:00): 02:30 happens twice
        // and comes once, the first time (00:30 UTC); the next is the next night's.
        ("CRON_TZ=Europe/Paris 30 2 * * *", "2026-10-24T12:00", "2026-10-25T00:30"),
        ("CRON_TZ=Europe/Paris 30 2 * * *", "2026-10-25T00:30", "2026-10-26T01:30"),
        // Every quarter hour through the change: 02:45 (first pass), then 03:00 an hour and a quarter later.
        ("CRON_TZ=Europe/Paris */15 * * * *", "2026-10-25T00:30", "2026-10-25T00:45"),
        ("CRON_TZ=Europe/Paris */15 * * * *", "2026-10-25T00:45", "2026-10-25T02:00"),
    ])
    func nextMinute(expression: String, after: String, expected: String) throws {
        #expect(try Self.next(expression, after: after) == expected)
    }

    /// Random expressions against a scan of every minute for ten days, each minute's fields
    /// read by Foundation's Gregorian calendar in UTC.
    /// In UTC and in zones with whole, half and three-quarter hour offsets, over days without a
    /// change of clocks (late November, in these zones), where one instant shows each local time.
    @Test(arguments: ["UTC", "Europe/Paris", "America/New_York", "Asia/Kolkata", "Pacific/Chatham"])
    func agreesWithAMinuteByMinuteScan(zone: String) throws {
        var calendar = Calendar(identifier: .gregorian)
        calendar.timeZone = TimeZone(identifier: zone)!
        var random = SystemRandomNumberGenerator()
        func field(_ range: ClosedRange<Int>) -> (text: String, values: Set<Int>) {
            switch Int.random(in: 0..<5, using: &random) {
            case 0: return ("*", Set(range))
            case 1:
                let step = Int.random(in: 2...5, using: &random)
                return ("*/\(step)", Set(stride(from: range.lowerBound, through: range.upperBound, by: step)))
            case 2:
                let low = Int.random(in: range, using: &random), high = Int.random(in: low...range.upperBound, using: &random)
                return ("\(low)-\(high)", Set(low...high))
            default:
                let values = Set((0..<Int.random(in: 1...3, using: &random)).map { _ in Int.random(in: range, using: &random) })
                return (values.sorted().map(String.init).joined(separator: ","), values)
            }
        }
        for _ in 0..<20 {
            let minute = field(0...59), hour = field(0...23), day = field(1...31), month = (text: "*", values: Set(1...12)), weekday = field(0...6)
            let text = [minute.text, hour.text, day.text, month.text, weekday.text].joined(separator: " ")
            let schedule = try CronSchedule(parsing: zone == "UTC" ? text : "CRON_TZ=\(zone) \(text)")
            let start = Self.at("2026-11-25T13:37") + Int64.random(in: 0..<86_400, using: &random)
            var expected: Int64?
            var time = (start / 60 + 1) * 60
            while time < start + 10 * 86_400 {
                let parts = calendar.dateComponents([.minute, .hour, .day, .month, .weekday], from: Date(timeIntervalSince1970: Double(time)))
                let byDay = day.values.contains(parts.day!), byWeekday = weekday.values.contains(parts.weekday! - 1)
                let dayMatches = switch (day.text.hasPrefix("*"), weekday.text.hasPrefix("*")) {
                case (true, true): true
                case (true, false): byWeekday
                case (false, true): byDay
                case (false, false): byDay || byWeekday
                }
                if minute.values.contains(parts.minute!), hour.values.contains(parts.hour!), month.values.contains(parts.month!), dayMatches {
                    expected = time
                    break
                }
                time += 60
            }
            let found = schedule.next(after: start)
            if let expected {
                #expect(found == expected, "\(text) after \(start)")
            } else {
                #expect(found.map { $0 >= start + 10 * 86_400 } ?? false, "\(text) after \(start): \(String(describing: found))")
            }
        }
    }

    @Test(arguments: [
        ("61 * * * *", "cron '61 * * * *': the minute field '61' has '61', not a number from 0 to 59"),
        ("* * *", "cron '* * *' has 3 fields; give five: minute hour day-of-month month day-of-week, as '0 3 * * *' (UTC)"),
        ("0 0 30 2 *", "cron '0 0 30 2 *' names no day that exists (as the 30th of February); check the day-of-month and month fields"),
        ("5-1 * * * *", "cron '5-1 * * * *': the minute field '5-1' has the range '5-1', which runs backwards; write it low to high, or as two ranges"),
        ("*/0 * * * *", "cron '*/0 * * * *': the minute field '*/0' has step '0'; a step is a whole number of at least 1"),
        ("@reboot", "cron '@reboot' is not one of @hourly, @daily, @weekly, @monthly, @yearly; or give five fields, as '0 3 * * *'"),
        ("JAN * * * *", "cron 'JAN * * * *': the minute field 'JAN' has 'JAN', not a number from 0 to 59"),
        ("0 0 * * FUN", "cron '0 0 * * FUN': the day of week field 'FUN' has 'FUN', not a number from 0 to 7 or a name (SUN-SAT)"),
        ("1,,2 * * * *", "cron '1,,2 * * * *': the minute field '1,,2' has an empty item in its list; separate values with single commas"),
        ("CRON_TZ=Mars/Olympus 0 9 * * *", "cron 'CRON_TZ=Mars/Olympus 0 9 * * *' names the time zone 'Mars/Olympus', which is not one; give an IANA name such as Europe/Paris, America/New_York or UTC"),
        ("CRON_TZ=Europe/Paris", "cron '' has 0 fields; give five: minute hour day-of-month month day-of-week, as '0 3 * * *' (UTC)"),
        ("", "cron '' has 0 fields; give five: minute hour day-of-month month day-of-week, as '0 3 * * *' (UTC)"),
    ])
    func refused(expression: String, message: String) {
        #expect(throws: CronSchedule.Problem(message: message)) { try CronSchedule(parsing: expression) }
    }
}
