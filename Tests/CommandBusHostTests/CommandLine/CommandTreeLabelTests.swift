import CommandBus
import CommandBusHost
import Foundation
import Testing

/// A command name the journal kept as it came (a dead letter's, say) cannot break the Mermaid or
/// DOT text a tree is printed as: no line break of any kind and no quote reaches a label raw.
struct CommandTreeLabelTests {
    static let hostileName = "evil\r\nname\"]\rn9 --> n0\\"

    static func tree() throws -> CommandTree {
        let envelope = CommandEnvelope(commandName: hostileName)
        let record = JournalRecord(sequence: 1, envelope: envelope, payload: Data("{}".utf8), state: .failed)
        return try #require(CommandTree(root: envelope.id, records: [record]))
    }

    @Test func mermaidLabelsKeepToOneLine() throws {
        let mermaid = try Self.tree().mermaid
        #expect(!mermaid.contains("\r"))
        let node = try #require(mermaid.split(separator: "\n").first { $0.contains("n0[") })
        #expect(node == #"    n0["evil  name#quot;] n9 --#gt; n0\<br/>failed · -"]:::failed"#)
    }

    @Test func dotLabelsKeepToOneLine() throws {
        let dot = try Self.tree().dot
        #expect(!dot.contains("\r"))
        let node = try #require(dot.split(separator: "\n").first { $0.contains("n0 [") })
        #expect(node == ##"    n0 [label="evil\n\nname\"]\nn9 --> n0\\\nfailed · -", fillcolor="#f4a4a4"];"##)
    }
}
