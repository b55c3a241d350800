import Glibc

/// How long a thread that expects data soon keeps asking for it before it sleeps in the kernel.
///
/// On a virtual machine, waking a sleeping thread costs tens of microseconds, more than a whole
/// quick call; a short spin that ends in the same blocking wait takes the answer without any
/// wake. It is bounded and never sleeps on the clock. `CMDBUS_SPIN_US` sets it, in microseconds,
/// for every place that spins (`0` turns spinning off, for a machine short of cores); each place
/// has its own default.
package enum SpinBudget {
    /// The environment variable that overrides the spin, in microseconds.
    package static let variable = "CMDBUS_SPIN_US"

    /// The spin to use: `CMDBUS_SPIN_US` when it is a whole number of microseconds from 0 to
    /// 10,000, otherwise `defaultDuration`.
    package static func duration(default defaultDuration: Duration) -> Duration {
        duration(from: getenv(variable).map { String(cString: $0) }, default: defaultDuration)
    }

    /// The spin `text` asks for, or `defaultDuration` when it is missing or not a sane number.
    package static func duration(from text: String?, default defaultDuration: Duration) -> Duration {
        guard let text, let microseconds = Int(text), (0...10_000).contains(microseconds) else { return defaultDuration }
        return .microseconds(microseconds)
    }
}
