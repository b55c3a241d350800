// swift-tools-version:6.0
import PackageDescription

// A CommandBus plugin, made from the template by scripts/new-plugin.sh.
// Build:   swift build -c release
// Install: copy .build/release/libTemplate.so into a plugin directory (./plugins, $CMDBUS_PLUGINS or --plugins DIR).
let package = Package(
    name: "Template",
    platforms: [.macOS(.v15)],
    products: [
        .library(name: "Template", type: .dynamic, targets: ["Template"]),
    ],
    dependencies: [
        .package(path: "@COMMANDBUS_PATH@"),
    ],
    targets: [
        .target(name: "Template", dependencies: [.product(name: "CommandBusPlugin", package: "@COMMANDBUS_PACKAGE@")]),
        .testTarget(name: "TemplateTests", dependencies: ["Template"]),
    ],
    swiftLanguageModes: [.v6]
)
