import Foundation
import Testing

// README-EXAMPLE-BEGIN
import CommandBus

struct SayHello: Command {
    typealias Result = Hello
    static let name = "say-hello"
    var name: String
}

struct Hello: Codable, Sendable {
    var message: String
}

struct SayHelloHandler: CommandHandler {
    func canHandle(_ command: SayHello) -> Bool { !command.name.isEmpty }

    func handle(_ command: SayHello, context: CommandContext) async throws -> Hello {
        Hello(message: "Hello, \(command.name)!")
    }
}

func readmeExample() async throws -> String {
    let bus = CommandBus()
    bus.register(SayHelloHandler())

    // Typed: a Swift value in, a Swift value out.
    let hello = try await bus.send(SayHello(name: "Ada"))

    // Dynamic: a name and JSON in, JSON out (what the CLI and plugins use).
    let json = try await bus.send(name: "say-hello", payload: Data(#"{"name":"Lin"}"#.utf8))

    // Fire and forget, with a ticket to follow it.
    let ticket = bus.post(SayHello(name: "Grace"))
    let later = try await ticket.result

    return [hello.message, String(decoding: json, as: UTF8.self), later.message].joined(separator: " | ")
}
// README-EXAMPLE-END

struct ReadmeExampleTests {
    @Test func theExampleRuns() async throws {
        #expect(try await readmeExample() == #"Hello, Ada! | {"message":"Hello, Lin!"} | Hello, Grace!"#)
    }

    @Test func theReadmeShowsThisVeryCode() throws {
        let testFile = try String(contentsOfFile: #filePath, encoding: .utf8)
        let readme = try String(
            contentsOf: URL(fileURLWithPath: #filePath).deletingLastPathComponent()
                .appendingPathComponent("../../README.md").standardizedFileURL,
            encoding: .utf8
        )
        let begin = try #require(testFile.range(of: "// README-EXAMPLE-BEGIN\n"))
        let end = try #require(testFile.range(of: "// README-EXAMPLE-END"))
        let example = String(testFile[begin.upperBound..<end.lowerBound])
        #expect(readme.contains(example), "README.md's example differs from ReadmeExampleTests.swift; copy it over")
    }
}
