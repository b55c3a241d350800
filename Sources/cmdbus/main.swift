import CommandBusHost
import Foundation

// A thin main: everything lives in CommandBusHost's CommandLineTool.
exit(await CommandLineTool.run(Array(CommandLine.arguments.dropFirst())))
