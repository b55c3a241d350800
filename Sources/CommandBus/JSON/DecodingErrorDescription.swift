/// A one-line account of why a payload did not decode, naming the field.
///
/// `missing field 'name'`, `field 'items.[2].count' should be Int`, `not valid JSON (…)`.
package func describeDecodingFailure(_ error: any Error) -> String {
    guard let decodingError = error as? DecodingError else { return String(describing: error) }
    func path(_ codingPath: [any CodingKey]) -> String {
        codingPath.map { $0.intValue.map { "[\($0)]" } ?? $0.stringValue }.joined(separator: ".")
    }
    switch decodingError {
    case .keyNotFound(let key, let context):
        let parent = path(context.codingPath)
        return "missing field '\(parent.isEmpty ? key.stringValue : parent + "." + key.stringValue)'"
    case .typeMismatch(let type, let context):
        return "field '\(path(context.codingPath))' should be \(type)"
    case .valueNotFound(let type, let context):
        return "field '\(path(context.codingPath))' is null, expected \(type)"
    case .dataCorrupted(let context):
        let field = path(context.codingPath)
        let reason = context.underlyingError.map { String(describing: $0) } ?? context.debugDescription
        let oneLine = reason.split(whereSeparator: \.isNewline).joined(separator: " ")
        return field.isEmpty ? "not valid JSON (\(oneLine))" : "field '\(field)': \(oneLine)"
    @unknown default:
        return String(describing: decodingError)
    }
}
