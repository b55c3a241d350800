/// The Swift compiler's major.minor version the host was built with, compared with each plugin's.
///
/// The plugin SDK has its own copy of this ladder (it shares no module with the host).
package let hostSwiftCompilerVersion: String = {
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
