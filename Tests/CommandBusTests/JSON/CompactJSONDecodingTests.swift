@testable import CommandBus
import Foundation
import Testing

/// The core decodes commands and results through `JSONWire.decode`: `CompactJSONDecoding` where it
/// is sure of Foundation's answer, `JSONDecoder` elsewhere and for every error. (The decoder's
/// source is the SDK's too; `CommandBusPluginTests` and the `sdk-decoder` fuzz target check it
/// in depth. These check the core's path through it.)
struct CompactJSONDecodingTests {
    @Test func randomCommandsDecodeToFoundationsValue() throws {
        var random = SplitMix(state: 20_261_123)
        var compact = 0
        for index in 0..<1_000 {
            let bytes = try JSONWire.encoder.encode(random.command(.init(asciiKeys: index.isMultiple(of: 2))))
            let expected = try JSONDecoder().decode(SampleCommand.self, from: bytes)
            #expect(try JSONWire.decode(SampleCommand.self, from: bytes) == expected, "case \(index)")
            if CompactJSONDecoding.decode(SampleCommand.self, from: bytes) != nil { compact += 1 }
        }
        // Most go the fast way (a key like "10" that Foundation may fold into an Int key is left to it).
        #expect(compact > 0, "the compact decoder declined every command")
    }

    struct Stamped: Codable, Equatable {
        var at: Date
        var name: String
    }

    @Test func whatOnlyFoundationKnowsIsLeftToIt() throws {
        let bytes = Data(#"{"at": 12.5, "name": "Ada"}"#.utf8)
        #expect(CompactJSONDecoding.decode(Stamped.self, from: bytes) == nil)
        #expect(try JSONWire.decode(Stamped.self, from: bytes) == Stamped(at: Date(timeIntervalSinceReferenceDate: 12.5), name: "Ada"))
    }

    @Test func aPayloadThatDoesNotDecodeFailsWithFoundationsWords() throws {
        let bytes = Data(#"{"at": 12.5, "name": 42}"#.utf8)
        var foundation = ""
        do { _ = try JSONDecoder().decode(Stamped.self, from: bytes) } catch { foundation = "\(error)" }
        var ours = ""
        do { _ = try JSONWire.decode(Stamped.self, from: bytes) } catch { ours = "\(error)" }
        #expect(!ours.isEmpty && ours == foundation)
    }
}
