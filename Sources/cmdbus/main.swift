import CommandBusHost
import Dispatch
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

// A thin main: everything lives in CommandBusHost's CommandLineTool.
//
// The tool runs in a detached task and ends the process from there. It never hops back
// to the main actor: a plugin that loads full Foundation into this host (which links only
// FoundationEssentials) changes how the main queue is drained, and such a hop was seen to
// hang forever. For the same reason the process leaves with _exit, after flushing stdio,
// rather than running plugin libraries' teardown in exit(): plugins are never unloaded.
Task.detached {
    let status = await CommandLineTool.run(Array(CommandLine.arguments.dropFirst()))
    fflush(nil)
    _exit(status)
}
dispatchMain()
