import CommandBusHost
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

// A thin main: everything lives in CommandBusHost's CommandLineTool.
exit(await CommandLineTool.run(Array(CommandLine.arguments.dropFirst())))
