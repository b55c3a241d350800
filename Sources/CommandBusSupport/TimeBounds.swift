/// The longest time, in seconds, any option or request field that takes one accepts (about 31
/// years): longer ones are typing mistakes, and their milliseconds would not fit the `Int64` a
/// `Duration` is built from (`1e300` once stopped the process on the conversion).
package let longestAcceptedSeconds: Double = 1_000_000_000
