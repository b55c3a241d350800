/// The longest time, in seconds, any option or request field that takes one accepts (about 31
/// years): longer ones are typing mistakes, and their milliseconds would not fit the `Int64` a
/// `Duration` is built from (`1e300` once stopped the process on the conversion).
package let longestAcceptedSeconds: Double = 1_000_000_000

extension Duration {
    /// `seconds`, positive and at most ``longestAcceptedSeconds``, in whole milliseconds and at
    /// least one: a positive wait must not become none (a timeout that ends a command before it
    /// starts, a drain that waits for nothing). The command line's `--timeout` and `--drain`
    /// and a socket request's `timeout` are kept so.
    package static func positive(seconds: Double) -> Duration {
        .milliseconds(max(1, Int64(seconds * 1000)))
    }
}

/// `seconds` as milliseconds to the microsecond, as the host's JSON gives a duration: past that,
/// a clock's or a float's noise only misleads a reader (`0.15783309936523438`).
package func roundedMilliseconds(_ seconds: Double) -> Double {
    (seconds * 1_000_000).rounded() / 1000
}

/// `seconds` to the millisecond, as the host's JSON gives an uptime.
package func roundedSeconds(_ seconds: Double) -> Double {
    (seconds * 1000).rounded() / 1000
}
