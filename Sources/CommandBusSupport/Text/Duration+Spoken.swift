extension Duration {
    /// The duration as a message says it: whole seconds as a count ("1 second", "10 seconds"),
    /// where `Duration`'s own description says "1.0 seconds"; whole milliseconds under a second
    /// as milliseconds ("50 ms", where it says "0.05 seconds"); anything else as that does
    /// ("1.2 seconds"). Every module's messages use this one; the core, which imports nothing
    /// of the host's, keeps a copy for its own (`CommandBusError.timedOut`).
    package var spoken: String {
        let (seconds, attoseconds) = components
        if attoseconds == 0 { return counted(Int(seconds), "second") }
        if seconds == 0, self == .milliseconds(milliseconds) { return "\(milliseconds) ms" }
        return "\(self)"
    }
}
