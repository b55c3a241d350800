// swift-tools-version:6.0
import PackageDescription

let package = Package(
    name: "CommandBus",
    platforms: [.macOS(.v15)],
    products: [
        .library(name: "CommandBus", targets: ["CommandBus"]),
        .library(name: "CommandBusPlugin", targets: ["CommandBusPlugin"]),
        .library(name: "CommandBusHost", targets: ["CommandBusHost", "CommandBusLoading", "CommandBusSQLite"]),
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
        // libpq's header from the system (libpq-dev), for the shared bus: no package dependency. Not
        // linked: CommandBusPostgres loads libpq.so.5 when the bus is first used (LibPQ.swift).
        .systemLibrary(name: "CLibPQ", providers: [.apt(["libpq-dev"])]),
        // The host, as modules the compiler keeps apart (README: "Architecture"). Each may use only
        // the modules listed here, and scripts/check-layering.sh fails the tests if one imports more.
        // Small shared pieces: quoting, files, child processes, threads, the console.
        .target(name: "CommandBusSupport", dependencies: ["CLinux"]),
        // Linux's pidfd_open and timerfd, which the Glibc module leaves out (nothing to link: they are in libc).
        .systemLibrary(name: "CLinux"),
        // The SQLite journal.
        .target(name: "CommandBusSQLite", dependencies: ["CommandBus", "CommandBusSupport", "CSQLite"]),
        // The host's last words when an in-process plugin crashes it or calls exit() (C: signal handlers).
        .target(name: "CCrashReport"),
        // Plugins: the loader, trust and probing, isolation workers. Knows nothing of journals, sockets or the CLI.
        .target(name: "CommandBusLoading", dependencies: ["CommandBus", "CCommandBusABI", "CommandBusSupport", "CCrashReport", "CLinux"]),
        // A host session (bus + plugins + journal), its failures, and the BusClient seam every front end talks to.
        .target(name: "CommandBusHost", dependencies: ["CommandBus", "CommandBusSupport", "CommandBusLoading", "CommandBusSQLite"]),
        // cmdbus serve: the socket, its NDJSON protocol (both sides), hot loading.
        .target(name: "CommandBusServer", dependencies: ["CommandBus", "CommandBusSupport", "CommandBusLoading", "CommandBusSQLite", "CommandBusHost", "CEpoll"]),
        // A small HTTP/1.1 server on one epoll thread: bounded requests, timeouts, Server-Sent Events.
        .target(name: "CommandBusHTTP", dependencies: ["CommandBusSupport", "CEpoll"]),
        // Linux's epoll and eventfd headers, which the Glibc module leaves out (nothing to link: it is in libc).
        .systemLibrary(name: "CEpoll"),
        // cmdbus serve --http: the web dashboard, its JSON API and /metrics, over CommandBusHTTP.
        .target(
            name: "CommandBusDashboard",
            dependencies: ["CommandBus", "CommandBusSupport", "CommandBusLoading", "CommandBusSQLite", "CommandBusHost", "CommandBusHTTP"]
        ),
        // The shared bus in PostgreSQL: schema, hosts that claim and lease, the third BusClient.
        .target(name: "CommandBusPostgres", dependencies: ["CommandBus", "CommandBusSupport", "CommandBusHost", "CLibPQ"]),
        // The command line: typed options, subcommands, output.
        .target(
            name: "CommandBusCLI",
            dependencies: [
                "CommandBus", "CCommandBusABI", "CommandBusSupport", "CommandBusLoading", "CommandBusSQLite", "CommandBusHost",
                "CommandBusServer", "CommandBusPostgres", "CommandBusHTTP", "CommandBusDashboard",
            ]
        ),
        // A thin main: worker and probe children first, then the command line.
        .executableTarget(name: "cmdbus", dependencies: ["CommandBusCLI", "CommandBusLoading", "CommandBusSupport"]),
        .target(name: "Greeter", dependencies: ["CommandBusPlugin"], path: "Plugins/Greeter"),
        .target(name: "GreetAll", dependencies: ["CommandBusPlugin"], path: "Plugins/GreetAll"),
        .target(name: "CEcho", dependencies: ["CCommandBusABI"], path: "Plugins/CEcho"),
        .target(name: "Counter", dependencies: ["CommandBusPlugin"], path: "Plugins/Counter"),
        .target(name: "FixturePlugin", dependencies: ["CommandBusPlugin"], path: "Tests/Fixtures/FixturePlugin"),
        .executableTarget(
            name: "CommandBusBenchmarks",
            dependencies: [
                "CommandBus", "CommandBusSupport", "CommandBusLoading", "CommandBusSQLite", "CommandBusHost", "CommandBusPostgres", "CSQLite",
                "CommandBusHTTP", "CommandBusDashboard", "CommandBusServer",
            ]
        ),
        // The baseline the cold-start benchmarks compare with.
        .executableTarget(name: "HelloWorld"),
        .testTarget(name: "CommandBusTests", dependencies: ["CommandBus"]),
        // The plugin SDK's own code, away from the host's modules.
        .testTarget(name: "CommandBusPluginTests", dependencies: ["CommandBusPlugin"]),
        .testTarget(
            name: "CommandBusHostTests",
            dependencies: [
                "CommandBus", "CommandBusSupport", "CommandBusLoading", "CommandBusSQLite", "CommandBusHost", "CommandBusCLI",
                "CommandBusHTTP", "CommandBusDashboard", "CommandBusServer", "CommandBusPostgres",
            ]
        ),
    ],
    swiftLanguageModes: [.v6]
)
