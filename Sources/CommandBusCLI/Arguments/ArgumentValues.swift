import CommandBusHost
import CommandBusSupport

// The typed values of options: seconds, durations, counts and key=value pairs, each refused in
// one line that names the option when it is not one. Kept apart from the option groups so the
// arguments fuzz target can build them.

extension ArgumentSpec.Parsed {
    /// The option's value as a positive duration (`--timeout`, `--drain`): seconds, or a number
    /// with a unit as ``duration(_:)`` takes (`--timeout 500ms` as `--delay 500ms` is); a bad value
    /// names the option. A value under a millisecond is one (``Duration/positive(seconds:)``).
    func seconds(_ name: String) throws(HostFailure) -> Duration? {
        guard let text = value(name) else { return nil }
        guard let seconds = Self.seconds(in: text), seconds > 0 else {
            throw .usage("--\(name) takes a positive number of seconds (or 500ms, 5m, 2h), at most \(Int(longestAcceptedSeconds)), got \(quoted(text))")
        }
        return .positive(seconds: seconds)
    }

    /// The option's value as a duration: seconds, or a number with `ms`, `s`, `m`, `h`, `d` or `w`; a bad value names the option.
    func duration(_ name: String) throws(HostFailure) -> Duration? {
        guard let text = value(name) else { return nil }
        guard let seconds = Self.seconds(in: text) else {
            throw .usage("--\(name) takes a duration such as 30, 30s, 500ms, 5m, 2h or 30d, at most \(Int(longestAcceptedSeconds)) seconds, got \(quoted(text))")
        }
        return .milliseconds(Int64(seconds * 1000))
    }

    /// The seconds `text` names (`30`, `30s`, `500ms`, `5m`, `2h`, `1d`, `1w`), if it is such a
    /// duration from 0 to the longest accepted.
    static func seconds(in text: String) -> Double? {
        let units: [(String, Double)] = [("ms", 0.001), ("s", 1), ("m", 60), ("h", 3600), ("d", 86_400), ("w", 604_800)]
        let unit = units.first { text.hasSuffix($0.0) && Double(text.dropLast($0.0.count)) != nil }
        guard let number = Double(unit.map { String(text.dropLast($0.0.count)) } ?? text) else { return nil }
        let seconds = number * (unit?.1 ?? 1)
        return seconds >= 0 && seconds <= longestAcceptedSeconds ? seconds : nil
    }

    /// The option's value as a positive integer; a bad value names the option.
    func positiveInteger(_ name: String) throws(HostFailure) -> Int? {
        guard let text = value(name) else { return nil }
        guard let number = Int(text), number > 0 else { throw .usage("--\(name) takes a positive integer, got \(quoted(text))") }
        return number
    }

    /// `key=value` pairs of a repeatable option; a bad pair names the option.
    func keyValues(_ name: String) throws(HostFailure) -> [String: String] {
        var values: [String: String] = [:]
        for pair in all(name) {
            guard let equals = pair.firstIndex(of: "=") else {
                throw .usage("--\(name) takes key=value, got \(quoted(pair)); write it as one argument: --\(name) \(String(quoted(pair).dropFirst().dropLast()))=VALUE")
            }
            guard equals != pair.startIndex else {
                throw .usage("--\(name) takes key=value, got \(quoted(pair)), which has no key; name the key before the '='")
            }
            values[String(pair[..<equals])] = String(pair[pair.index(after: equals)...])
        }
        return values
    }
}
