import Foundation

/// A self-signed certificate for `localhost` and 127.0.0.1 (so a client checking the server's
/// name against it passes when it trusts the certificate itself), made with the openssl CLI.
public struct TestCertificate {
    public let directory: URL
    public let certificatePath: String
    public let keyPath: String

    public init() throws {
        directory = FileManager.default.temporaryDirectory.appendingPathComponent("steno-cert-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        certificatePath = directory.appendingPathComponent("cert.pem").path
        keyPath = directory.appendingPathComponent("key.pem").path
        let status = try runProgram("/usr/bin/openssl", [
            "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes",
            "-keyout", keyPath, "-out", certificatePath, "-days", "2", "-subj", "/CN=localhost",
            "-addext", "subjectAltName=DNS:localhost,IP:127.0.0.1",
        ])
        guard status == 0 else { throw TestClientError.protocolError("openssl req failed") }
    }

    public func remove() { try? FileManager.default.removeItem(at: directory) }
}
