/// A one-line account of why a payload did not decode, naming the field.
///
/// `missing field 'name'`, `field 'items.[2].count' should be a number`, `the payload should be
/// an object`, `not valid JSON (…)`: JSON's words for what was wanted, not Swift's type names.
package func describeDecodingFailure(_ error: any Error) -> String {
    guard let decodingError = error as? DecodingError else { return String(describing: error) }
    func path(_ codingPath: [any CodingKey]) -> String {
        codingPath.map { $0.intValue.map { "[\($0)]" } ?? $0.stringValue }.joined(separator: ".")
    }
    func subject(_ codingPath: [any CodingKey]) -> String {
        codingPath.isEmpty ? "the payload" : "field '\(path(codingPath))'"
    }
    switch decodingError {
    case .keyNotFound(let key, let context):
        let parent = path(context.codingPath)
        return "missing field '\(parent.isEmpty ? key.stringValue : parent + "." + key.stringValue)'"
    case .typeMismatch(let type, let context):
        return "\(subject(context.codingPath)) should be \(jsonKind(of: type))"
    case .valueNotFound(let type, let context):
        return "\(subject(context.codingPath)) is null, expected \(jsonKind(of: type))"
    case .dataCorrupted(let context):
        let field = path(context.codingPath)
        let reason = context.underlyingError.map { String(describing: $0) } ?? context.debugDescription
        let oneLine = reason.split(whereSeparator: \.isNewline).joined(separator: " ")
        return field.isEmpty ? "not valid JSON (\(oneLine))" : "field '\(field)': \(oneLine)"
    @unknown default:
        return String(describing: decodingError)
    }
}

/// What a Swift type decodes from, in JSON's words: `a string`, `a number`, `true or false`,
/// `an array`, `an object`; another type by its own name.
private func jsonKind(of type: Any.Type) -> String {
    let name = String(describing: type)
    if name == "String" || name == "Character" || name == "UUID" || name == "URL" { return "a string" }
    if name == "Bool" { return "true or false" }
    let numbers = ["Int", "Int8", "Int16", "Int32", "Int64", "UInt", "UInt8", "UInt16", "UInt32", "UInt64", "Double", "Float", "Float16", "Decimal"]
    if numbers.contains(name) { return "a number" }
    if name.hasPrefix("Array") || name.hasPrefix("Set") || name.hasPrefix("ContiguousArray") { return "an array" }
    if name.hasPrefix("Dictionary") { return "an object" }
    return name
}
