extension Duration {
    /// The duration as the core's messages say it ("1 second", "10 seconds", "50 ms", "1.5 seconds"):
    /// the core's own copy of `CommandBusSupport`'s `Duration.spoken`, which the host's modules
    /// use and the core cannot import. Internal, so a module that imports both sees one.
    var spoken: String {
        let (seconds, attoseconds) = components
        let attosecondsPerMillisecond: Int64 = 1_000_000_000_000_000
        if attoseconds == 0 { return "\(seconds) \(seconds == 1 ? "second" : "seconds")" }
        if seconds == 0, attoseconds % attosecondsPerMillisecond == 0 { return "\(attoseconds / attosecondsPerMillisecond) ms" }
        return "\(self)"
    }
}
