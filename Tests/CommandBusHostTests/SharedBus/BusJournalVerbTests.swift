import Foundation
import Testing

extension SharedBusTests {
    /// `journal tree --bus` draws a tree of work from the shared bus (it said the verb was
    /// unknown, though the bus host's dashboard draws the same tree), and the two verbs only a
    /// journal file has say why, and what to use, instead of calling themselves unknown.
    @Test(.timeLimit(.minutes(3)))
    func theJournalVerbsOfTheBusDrawTreesAndExplainWhatTheyLeaveToAFile() async throws {
        await BusHostProcess.stopAll()
        let database = try await SharedBusDatabase()
        let host = try await BusHostProcess(bus: database.url, plugins: ["libGreeter.so", "libGreetAll.so"])
        defer { Task { await host.stop(); await database.drop() } }
        let sent = try await Self.bus(database.url, "run", "greet-all", "-p", #"names=["Ada", "Bo"]"#, "-v")
        #expect(sent.status == 0, "\(sent.stderr)")
        let id = try #require(sent.stderr.split(separator: "\n").compactMap { line in
            line.split(separator: " ").first { UUID(uuidString: String($0)) != nil }.map(String.init)
        }.first, "\(sent.stderr)")

        let tree = try await Self.bus(database.url, "journal", "tree", id)
        #expect(tree.status == 0, "\(tree.stderr)")
        let lines = tree.stdout.split(separator: "\n")
        #expect(lines.count == 3, "\(tree.stdout)")
        #expect(lines.first?.hasPrefix("greet-all  succeeded  ") == true && lines.first?.hasSuffix(id) == true, "\(tree.stdout)")
        #expect(lines.dropFirst().allSatisfy { $0.contains("greet  succeeded") }, "\(tree.stdout)")
        let dot = try await Self.bus(database.url, "journal", "tree", id, "--format", "dot")
        #expect(dot.status == 0 && dot.stdout.hasPrefix("digraph"), "\(dot.stdout)\(dot.stderr)")
        let missing = try await Self.bus(database.url, "journal", "tree", UUID().uuidString)
        #expect(missing.status == 1 && missing.stderr.contains("has no entry"), "\(missing.stderr)")

        for (verb, advice) in [("recover", "'cmdbus bus status' shows the hosts"), ("discard", "'cmdbus journal prune --older-than AGE --bus URL' removes them")] {
            let refused = try await Self.bus(database.url, "journal", verb, id)
            #expect(refused.status == 64, "\(verb): \(refused.stderr)")
            #expect(refused.stderr.hasPrefix("cmdbus: error: 'cmdbus journal \(verb)' works on a journal file, not with --bus: "), "\(refused.stderr)")
            #expect(refused.stderr.contains(advice) && !refused.stderr.contains("unknown"), "\(refused.stderr)")
        }
    }
}
