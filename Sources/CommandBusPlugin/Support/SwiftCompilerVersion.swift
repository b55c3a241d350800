// The SDK keeps private copies of these few lines on purpose: a plugin must share no Swift
// module with the host. SwiftPM links executables with -export-dynamic, so a plugin's
// references to a module the host also links would bind to the host's copy (see README, "The ABI").
/// The Swift compiler's major.minor version, fixed when this module was compiled.
///
/// Plugins record it in their descriptor and the host compares it with its own:
/// Swift has no stable ABI on Linux, and a plugin shares the host's Swift runtime.
let swiftCompilerVersion: String = {
    #if compiler(>=7.0)
    return "7.x"
    #elseif compiler(>=6.5)
    return "6.5"
    #elseif compiler(>=6.4)
    return "6.4"
    #elseif compiler(>=6.3)
    return "6.3"
    #elseif compiler(>=6.2)
    return "6.2"
    #elseif compiler(>=6.1)
    return "6.1"
    #else
    return "6.0"
    #endif
}()
