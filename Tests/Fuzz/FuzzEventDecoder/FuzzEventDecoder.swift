import FuzzTargets

// See FuzzTargets/FuzzEventDecoder.swift for what this covers; docs/reliability.md for how to run it.

@_cdecl("LLVMFuzzerTestOneInput")
public func testOneInput(_ data: UnsafePointer<UInt8>?, _ size: Int) -> CInt {
    FuzzDriver.withInput(data, size) { FuzzEventDecoder.run($0) }
    return 0
}

@main
struct Main {
    static func main() {
        FuzzEventDecoder.prepare()
        FuzzDriver.main(testOneInput)
    }
}
