import CommandBus
import Foundation
import Testing

/// `CommandID.text` and `CommandID.parse` must agree with Foundation's `uuidString` and
/// `UUID(uuidString:)`: journals already hold ids Foundation wrote, and compare them as text.
struct CommandIDTextTests {
    @Test func writesWhatFoundationWrites() {
        for id in (0..<2_000).map({ _ in UUID() }) + (0..<2_000).map({ _ in CommandID.make() }) {
            #expect(CommandID.text(id) == id.uuidString)
        }
        let edges = [UUID(uuid: (0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0)),
                     UUID(uuid: (255, 255, 255, 255, 255, 255, 255, 255, 255, 255, 255, 255, 255, 255, 255, 255))]
        for id in edges { #expect(CommandID.text(id) == id.uuidString) }
    }

    @Test func readsWhatFoundationWritesInEitherCase() {
        for id in (0..<2_000).map({ _ in UUID() }) {
            #expect(CommandID.parse(id.uuidString) == id)
            #expect(CommandID.parse(id.uuidString.lowercased()) == id)
            #expect(CommandID.parse(id.uuidString[...]) == id)
        }
    }

    @Test(arguments: [
        "", "not an id", "E621E1F8-C36C-495A-93FC-0C247A3E6E5", "E621E1F8-C36C-495A-93FC-0C247A3E6E5FF",
        "E621E1F8C36C-495A-93FC-0C247A3E6E5F-", "E621E1F8-C36C-495A-93FC-0C247A3E6E5G", "{621E1F8-C36C-495A-93FC-0C247A3E6E5F",
        "E621E1F8-C36C-495A-93FC 0C247A3E6E5F", "E621E1F8-C36C-495A-93FC-0C247A3E6É", "é621E1F8-C36C-495A-93FC-0C247A3E6E",
    ])
    func refusesWhatFoundationRefuses(_ text: String) {
        #expect(CommandID.parse(text) == nil)
        #expect(UUID(uuidString: text) == nil)
    }
}
