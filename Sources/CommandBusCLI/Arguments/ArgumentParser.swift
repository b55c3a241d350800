import CommandBusSupport
import CommandBusHost
/// The options one subcommand accepts, and a parser for its arguments.
///
/// Supports `--name value`, `--name=value`, short aliases (`-p value`, or getopt's `-pvalue`),
/// flags, repeatable options, and `--` to end options. Anything else is a usage error
/// that names the offending argument.
struct ArgumentSpec: Sendable {
    /// One option: its long name, an optional one-letter alias, and the value it takes, if any.
    struct Option: Sendable {
        let name: String
        let short: Character?
        /// What the value is, as `--help` shows it (`PATH`, `SECONDS`); `nil` for a flag.
        let valueName: String?
        let help: String
        /// A flag that may also carry a value: as `--name=VALUE`, or as `--name VALUE` when the
        /// next argument is a path (it holds a `/` or ends in `.sock`), never a command name.
        var inlineValueAllowed = false
        /// The values the option takes, where they are a few words (shell completion offers them).
        let choices: [String]

        /// An option named `--name` (and `-short`) that takes a value described as `value`
        /// (one of `choices`, if given), or a flag without one.
        init(name: String, short: Character?, value: String? = nil, choices: [String] = [], help: String, inlineValueAllowed: Bool = false) {
            self.name = name
            self.short = short
            self.valueName = value
            self.choices = choices
            self.help = help
            self.inlineValueAllowed = inlineValueAllowed
        }

        /// Whether the option takes a value.
        var takesValue: Bool { valueName != nil }

        /// The ways to write it on a command line: `--name`, and `-s` if it has a short alias.
        var spellings: [String] { ["--" + name] + (short.map { ["-\($0)"] } ?? []) }
    }

    /// Whether `argument` reads as a socket path rather than a command name or operand.
    static func looksLikePath(_ argument: String) -> Bool {
        !argument.hasPrefix("-") && (argument.contains("/") || argument.hasSuffix(".sock"))
    }

    let command: String
    let options: [Option]

    /// The result of parsing: positional arguments, option values (in order), and flags.
    struct Parsed: Sendable {
        var positionals: [String] = []
        var values: [String: [String]] = [:]
        var flags: Set<String> = []

        func value(_ name: String) -> String? { values[name]?.last }
        func all(_ name: String) -> [String] { values[name] ?? [] }
        func has(_ name: String) -> Bool { flags.contains(name) }

        /// The value of an option with `choices`, which the parser has checked, as `T`; `fallback` without one.
        func choice<T: RawRepresentable>(_ name: String, or fallback: T) -> T where T.RawValue == String {
            value(name).flatMap(T.init(rawValue:)) ?? fallback
        }
    }

    func parse(_ arguments: [String]) throws(HostFailure) -> Parsed {
        var parsed = Parsed()
        var index = 0
        var optionsEnded = false
        while index < arguments.count {
            let argument = arguments[index]
            index += 1
            if optionsEnded || argument == "-" || !argument.hasPrefix("-") || Self.isNumber(argument) {
                parsed.positionals.append(argument)
                continue
            }
            if argument == "--" {
                optionsEnded = true
                continue
            }
            let (key, inlineValue) = split(argument)
            guard let option = find(key) else {
                let nearest = key.hasPrefix("--") ? nearestName(to: String(key.dropFirst(2)), among: options.map(\.name)) : nil
                let hint = nearest.map { "did you mean \(quoted("--" + $0))? " } ?? ""
                throw .usage("unknown option \(quoted(key)) for 'cmdbus \(command)'; \(hint)see 'cmdbus \(command) --help'")
            }
            if option.takesValue {
                let value: String
                if let inlineValue {
                    value = inlineValue
                } else if index < arguments.count, !arguments[index].hasPrefix("--") {
                    value = arguments[index]
                    index += 1
                } else {
                    throw .usage("option \(quoted(key)) of 'cmdbus \(command)' needs a value")
                }
                try refuseEmpty(value, of: option, writtenAs: key)
                parsed.values[option.name, default: []].append(value)
            } else {
                if let inlineValue {
                    guard option.inlineValueAllowed else { throw .usage("option \(quoted(key)) of 'cmdbus \(command)' takes no value") }
                    try refuseEmpty(inlineValue, of: option, writtenAs: key)
                    parsed.values[option.name, default: []].append(inlineValue)
                } else if option.inlineValueAllowed, index < arguments.count, Self.looksLikePath(arguments[index]) {
                    parsed.values[option.name, default: []].append(arguments[index])
                    index += 1
                }
                parsed.flags.insert(option.name)
            }
        }
        // An option with a few values takes one of them, here, for every such option at once.
        for option in options where !option.choices.isEmpty {
            for value in parsed.all(option.name) where !option.choices.contains(value) {
                let listed = option.choices.dropLast().joined(separator: ", ") + " or " + option.choices.last!
                throw .usage("--\(option.name) takes \(listed), got \(quoted(value))")
            }
        }
        return parsed
    }

    /// An empty value names nothing (an empty path, an empty name), and would be taken as one
    /// silently, so it is refused; an option left out takes its default.
    private func refuseEmpty(_ value: String, of option: Option, writtenAs key: String) throws(HostFailure) {
        guard value.isEmpty else { return }
        let wanted = option.valueName ?? "PATH"
        throw .usage("option \(quoted(key)) of 'cmdbus \(command)' was given an empty value; give it a \(wanted), or leave the option out")
    }

    private func find(_ key: String) -> Option? {
        if key.hasPrefix("--") {
            let name = String(key.dropFirst(2))
            return options.first { $0.name == name }
        }
        guard key.count == 2, let letter = key.last else { return nil }
        return options.first { $0.short == letter }
    }

    /// An option and the value written in the same argument: `--name=value`, or a short alias
    /// with its value attached as getopt allows (`-pname=Ada`, `-c8`).
    private func split(_ argument: String) -> (String, String?) {
        if !argument.hasPrefix("--"), argument.count > 2, let letter = argument.dropFirst().first,
           let option = options.first(where: { $0.short == letter }), option.takesValue {
            return ("-" + String(letter), String(argument.dropFirst(2)))
        }
        guard argument.hasPrefix("--"), let equals = argument.firstIndex(of: "=") else { return (argument, nil) }
        return (String(argument[..<equals]), String(argument[argument.index(after: equals)...]))
    }

    /// Negative numbers such as `-1` are positionals, not options.
    private static func isNumber(_ argument: String) -> Bool {
        argument.count > 1 && Double(argument) != nil
    }

    /// The options' lines for `--help`: names and values in one column, as wide as the
    /// longest needs up to 30 characters; an option longer than that has its help on the next line.
    var optionsHelp: String {
        let names = options.map { option in
            (option.short.map { "-\($0), " } ?? "    ") + "--\(option.name)" + (option.valueName.map { " " + $0 } ?? "")
        }
        let column = min(30, (names.map(\.count).max() ?? 0) + 2)
        return zip(names, options).map { names, option in
            names.count + 2 <= column
                ? "  " + names + String(repeating: " ", count: column - names.count) + option.help
                : "  " + names + "\n" + String(repeating: " ", count: column + 2) + option.help
        }.joined(separator: "\n")
    }
}

extension ArgumentSpec.Option {
    static let help = Self(name: "help", short: "h", help: "Show this help.")
    static let plugins = Self(name: "plugins", short: nil, value: "DIR", help: "A plugin directory (repeatable).")
    static let json = Self(name: "json", short: nil, help: "Machine-readable output and errors.")
    static let quiet = Self(name: "quiet", short: "q", help: "Don't report skipped plugin files.")
    static let connect = Self(
        name: "connect", short: nil, help: "Use a running 'cmdbus serve' (--connect SOCKET, --connect=SOCKET, or $CMDBUS_SOCKET).", inlineValueAllowed: true
    )
    static let isolate = Self(name: "isolate", short: nil, help: "Run each plugin's handlers in a worker process.")
    static let noProbe = Self(name: "no-probe", short: nil, help: "Load new plugin files without probing them first.")
    static let probeTimeout = Self(name: "probe-timeout", short: nil, value: "SECONDS", help: "Seconds a probe may take (default 10).")
    static let insecurePlugins = Self(
        name: "insecure-plugins", short: nil, help: "Load plugins others can write, and symlinks out."
    )
}
