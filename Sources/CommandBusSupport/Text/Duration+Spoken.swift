extension Duration {
    /// The duration as a message says it: whole seconds as a count ("1 second", "10 seconds"),
    /// where `Duration`'s own description says "1.0 seconds"; whole milliseconds under a second
    /// as milliseconds ("50 ms", where it says "0.05 seconds"); anything else as that does
    /// ("1.2 seconds"). Every module's messages use this one; the core, which imports nothing
    /// of the host's, keeps a copy for its own (`CommandBusError.timedOut`).
    package var spoken: String {
        let (seconds, attoseconds) = components
        let attosecondsPerMillisecond: Int64 = 1_000_000_000_000_000
        if attoseconds == 0 { return counted(Int(seconds), "second") }
        if seconds == 0, attoseconds % attosecondsPerMillisecond == 0 { return "\(attoseconds / attosecondsPerMillisecond) ms" }
        return "\(self)"
    }
}
