import CommandBusSupport
import CommandBus
#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

/// A command and the subcommands its handler sent, as the journal recorded them, with timings.
///
/// Built from the records of one tree of work (one correlation id); `journal tree` prints it as
/// text, Mermaid or DOT, and the dashboard draws it as a waterfall from ``json``.
package struct CommandTree: Sendable {
    /// One command of the tree.
    package struct Node: Sendable {
        package var record: JournalRecord
        package var children: [Node]

        /// When the handler started it, or when it was accepted if no handler started it.
        package var start: Date { record.startedAt ?? record.envelope.createdAt }
        /// How long it ran, if it ended.
        package var duration: TimeInterval? { record.finishedAt.map { $0.timeIntervalSince(start) } }
        /// The node and everything under it, parents first.
        package var all: [Node] { [self] + children.flatMap(\.all) }
    }

    /// The command asked for, at the top.
    package let root: Node

    /// The tree under `id`, from the records of its correlation; `nil` if `id` is not among them.
    package init?(root id: UUID, records: [JournalRecord]) {
        var children: [UUID: [JournalRecord]] = [:]
        for record in records {
            if let parent = record.envelope.parentID { children[parent, default: []].append(record) }
        }
        func node(_ record: JournalRecord, depth: Int) -> Node {
            // A journal edited by hand could hold a cycle; a depth bound keeps that finite.
            let below = depth < 64 ? (children[record.envelope.id] ?? []).sorted { $0.sequence < $1.sequence } : []
            return Node(record: record, children: below.map { node($0, depth: depth + 1) })
        }
        guard let top = records.first(where: { $0.envelope.id == id }) else { return nil }
        root = node(top, depth: 0)
    }

    /// The formats `journal tree --format` writes.
    package enum Format: String, CaseIterable, Sendable {
        case text, mermaid, dot
    }

    /// The tree in `format`.
    package func rendered(_ format: Format) -> String {
        switch format {
        case .text: text
        case .mermaid: mermaid
        case .dot: dot
        }
    }

    // MARK: Text

    /// Indented lines, one per command: name, state, duration, start offset from the root, id, error.
    package var text: String {
        var lines: [String] = []
        func walk(_ node: Node, prefix: String, branch: String) {
            lines.append(prefix + branch + line(node))
            let childPrefix = prefix + (branch == "├─ " ? "│  " : branch.isEmpty ? "" : "   ")
            for (index, child) in node.children.enumerated() {
                walk(child, prefix: childPrefix, branch: index == node.children.count - 1 ? "└─ " : "├─ ")
            }
        }
        walk(root, prefix: "", branch: "")
        return lines.joined(separator: "\n")
    }

    private func line(_ node: Node) -> String {
        var parts = [quotedLine(node.record.envelope.commandName), node.record.state.rawValue, Self.took(node)]
        if node.record.envelope.id != root.record.envelope.id { parts.append("at +" + Self.milliseconds(offset(node))) }
        parts.append(node.record.envelope.id.uuidString)
        if let message = node.record.errorMessage { parts.append(quotedLine(message)) }
        return parts.joined(separator: "  ")
    }

    /// Seconds from the root's start to the node's start.
    package func offset(_ node: Node) -> TimeInterval { node.start.timeIntervalSince(root.start) }

    /// How long a node took, or has run so far ("1.5 s so far") while it is at work; "-" for
    /// one that ended without a start, or has not started.
    static func took(_ node: Node, now: Date = .now) -> String {
        if let duration = node.duration { return milliseconds(duration) }
        guard node.record.state == .running else { return milliseconds(nil) }
        return milliseconds(max(0, now.timeIntervalSince(node.start))) + " so far"
    }

    /// A duration in milliseconds to one decimal, a whole number without its ".0" ("100 ms",
    /// "2.5 ms", as the dashboard says them), or "-" if unknown.
    package static func milliseconds(_ seconds: TimeInterval?) -> String {
        guard let seconds else { return "-" }
        let tenths = (seconds * 10_000).rounded()
        let whole = Int64(tenths / 10)
        return tenths.truncatingRemainder(dividingBy: 10) == 0 ? "\(whole) ms" : "\(tenths / 10) ms"
    }

    // MARK: Mermaid and DOT

    /// A Mermaid flowchart, for a Markdown file.
    package var mermaid: String {
        var lines = ["flowchart TD"]
        let nodes = root.all
        for (index, node) in nodes.enumerated() {
            let label = Self.mermaidEscaped(node.record.envelope.commandName) + "<br/>"
                + "\(node.record.state.rawValue) · \(Self.took(node))"
            lines.append("    n\(index)[\"\(label)\"]:::\(node.record.state.rawValue)")
        }
        appendEdges(nodes) { lines.append("    n\($0) --> n\($1)") }
        for state in CommandState.allCases {
            lines.append("    classDef \(state.rawValue) fill:\(Self.color(state)),stroke:#333,color:#111")
        }
        return lines.joined(separator: "\n")
    }

    /// A Graphviz digraph, for `dot -Tpng`.
    package var dot: String {
        var lines = [
            "digraph command_tree {", "    rankdir=TB;",
            "    node [shape=box, style=\"rounded,filled\", fontname=\"Helvetica\"];",
        ]
        let nodes = root.all
        for (index, node) in nodes.enumerated() {
            let label = "\(node.record.envelope.commandName)\n\(node.record.state.rawValue) · \(Self.took(node))"
            lines.append("    n\(index) [label=\"\(Self.dotEscaped(label))\", fillcolor=\"\(Self.color(node.record.state))\"];")
        }
        appendEdges(nodes) { lines.append("    n\($0) -> n\($1);") }
        lines.append("}")
        return lines.joined(separator: "\n")
    }

    private func appendEdges(_ nodes: [Node], _ edge: (Int, Int) -> Void) {
        var index: [UUID: Int] = [:]
        for (position, node) in nodes.enumerated() { index[node.record.envelope.id] = position }
        for (position, node) in nodes.enumerated() {
            for child in node.children { if let target = index[child.record.envelope.id] { edge(position, target) } }
        }
    }

    /// The fill color of a state, shared by the renderers.
    static func color(_ state: CommandState) -> String {
        switch state {
        case .succeeded: "#b7e4c7"
        case .failed: "#f4a4a4"
        case .timedOut: "#f6c177"
        case .cancelled: "#d3d3d3"
        case .running: "#a9cbf5"
        case .pending: "#eeeeee"
        }
    }

    /// Makes text safe inside a quoted Mermaid label: a line break of any kind would end the
    /// flowchart's line.
    static let mermaidEscaped = ASCIIEscaping(["\"": "#quot;", "<": "#lt;", ">": "#gt;", "\n": " ", "\r": " "])
    /// Makes text safe inside a quoted DOT label; a carriage return becomes DOT's own line break
    /// escape, as a newline does.
    static let dotEscaped = ASCIIEscaping(["\"": "\\\"", "\\": "\\\\", "\n": "\\n", "\r": "\\n"])

    // MARK: JSON

    /// The tree as nested objects with start offsets and durations in milliseconds, for the dashboard;
    /// `plugin` names the plugin that handles a command name, where one is known.
    package func json(plugin: (String) -> String? = { _ in nil }) -> JSONValue {
        func object(_ node: Node) -> JSONValue {
            var fields: [String: JSONValue] = [
                "id": .string(node.record.envelope.id.uuidString), "command": .string(node.record.envelope.commandName),
                "state": .string(node.record.state.rawValue), "attempts": .integer(Int64(node.record.attempts)),
                "offsetMs": .number(roundedMilliseconds(offset(node))), "children": .array(node.children.map(object)),
            ]
            if let duration = node.duration {
                fields["durationMs"] = .number(roundedMilliseconds(duration))
            } else if !node.record.state.isTerminal {
                // How long it has run so far, so a tree still at work is drawn to scale.
                fields["elapsedMs"] = .number(roundedMilliseconds(max(0, Date.now.timeIntervalSince(node.start))))
            }
            if let message = node.record.errorMessage { fields["error"] = .string(message) }
            if let name = plugin(node.record.envelope.commandName) { fields["plugin"] = .string(name) }
            return .object(fields)
        }
        return object(root)
    }
}
