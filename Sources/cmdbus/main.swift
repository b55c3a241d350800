import CommandBusCLI
import CommandBusLoading
import CommandBusSupport
import Dispatch
import Glibc

// A thin main: a probe or worker child does its job first (loading never goes through the
// command line); everything else is CommandBusCLI's CommandLineTool.
//
// The tool runs in a detached task and ends the process from there. It never hops back
// to the main actor: a plugin that loads full Foundation into this host (which links only
// FoundationEssentials) changes how the main queue is drained, and such a hop was seen to
// hang forever. For the same reason the process leaves with _exit, after flushing stdio,
// rather than running plugin libraries' teardown in exit(): plugins are never unloaded.
let arguments = Array(CommandLine.arguments.dropFirst())
if let role = ChildProcessRole(arguments: arguments) { role.run() }
// One line naming the plugin if one loaded into this process crashes it or calls exit().
PluginCrashReport.install()
// Results keep stdout to themselves: a plugin's own prints go to stderr.
Console.keepResultsPrivate()
Task.detached {
    let status = await CommandLineTool.run(arguments, notUTF8: .inProcess())
    fflush(nil)
    _exit(status)
}
// For instruction counting only (`scripts/bench.sh --instructions`): valgrind cannot follow
// `dispatchMain`'s hand-off of the main thread, so the main thread just sleeps instead. The main
// queue is then never drained, which a plugin that uses it would notice.
if getenv("CMDBUS_PARK_MAIN_THREAD") != nil { while true { sleep(3_600) } }
dispatchMain()
