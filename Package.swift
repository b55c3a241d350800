// swift-tools-version:6.0
import PackageDescription

let package = Package(
    name: "CommandBus",
    platforms: [.macOS(.v15)],
    products: [
        .library(name: "CommandBus", targets: ["CommandBus"]),
    ],
    dependencies: [],
    targets: [
        .target(name: "CommandBus"),
        .executableTarget(
            name: "CommandBusBenchmarks",
            dependencies: ["CommandBus"]
        ),
        .testTarget(name: "CommandBusTests", dependencies: ["CommandBus"]),
    ],
    swiftLanguageModes: [.v6]
)
