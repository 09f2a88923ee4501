/// An optional string as a C string for the call's duration: NULL for nil
/// (C APIs of ours take NULL for "absent").
func withOptionalCString<R>(_ s: String?, _ body: (UnsafePointer<CChar>?) -> R) -> R {
    guard let s else { return body(nil) }
    return s.withCString { body($0) }
}
