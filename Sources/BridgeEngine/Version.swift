public enum BridgeEngineVersion { public static let value = "0.1.0" }
