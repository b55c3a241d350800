// swift-tools-version:6.0
import PackageDescription

let package = Package(
    name: "CommandBus",
    platforms: [.macOS(.v15)],
    products: [
        .library(name: "CommandBus", targets: ["CommandBus"]),
        .library(name: "CommandBusPlugin", targets: ["CommandBusPlugin"]),
        .library(name: "CommandBusHost", targets: ["CommandBusHost"]),
        .executable(name: "cmdbus", targets: ["cmdbus"]),
        // Example plugins: each a shared library with its own copy of the SDK.
        .library(name: "Greeter", type: .dynamic, targets: ["Greeter"]),
        .library(name: "GreetAll", type: .dynamic, targets: ["GreetAll"]),
        .library(name: "CEcho", type: .dynamic, targets: ["CEcho"]),
        .library(name: "Counter", type: .dynamic, targets: ["Counter"]),
        // A plugin for the host's tests only (sleeps, failures, subcommands).
        .library(name: "FixturePlugin", type: .dynamic, targets: ["FixturePlugin"]),
    ],
    dependencies: [],
    targets: [
        .target(name: "CommandBus"),
        .target(name: "CCommandBusABI"),
        // The SDK depends on nothing the host links, so no Swift symbol is shared across the boundary.
        .target(name: "CommandBusPlugin", dependencies: ["CCommandBusABI"]),
        // SQLite from the system (libsqlite3-dev), for the journal: no package dependency.
        .systemLibrary(name: "CSQLite", pkgConfig: "sqlite3", providers: [.apt(["libsqlite3-dev"])]),
        .target(name: "CommandBusHost", dependencies: ["CommandBus", "CCommandBusABI", "CSQLite"]),
        .executableTarget(name: "cmdbus", dependencies: ["CommandBusHost"]),
        .target(name: "Greeter", dependencies: ["CommandBusPlugin"], path: "Plugins/Greeter"),
        .target(name: "GreetAll", dependencies: ["CommandBusPlugin"], path: "Plugins/GreetAll"),
        .target(name: "CEcho", dependencies: ["CCommandBusABI"], path: "Plugins/CEcho"),
        .target(name: "Counter", dependencies: ["CommandBusPlugin"], path: "Plugins/Counter"),
        .target(name: "FixturePlugin", dependencies: ["CommandBusPlugin"], path: "Tests/Fixtures/FixturePlugin"),
        .executableTarget(
            name: "CommandBusBenchmarks",
            dependencies: ["CommandBus", "CommandBusHost", "CSQLite"]
        ),
        // The baseline the cold-start benchmarks compare with.
        .executableTarget(name: "HelloWorld"),
        .testTarget(name: "CommandBusTests", dependencies: ["CommandBus"]),
        .testTarget(name: "CommandBusHostTests", dependencies: ["CommandBusHost", "CommandBus"]),
    ],
    swiftLanguageModes: [.v6]
)
