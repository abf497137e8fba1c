import FuzzTargets

// See FuzzTargets/FuzzJSON.swift for what this covers; docs/reliability.md for how to run it.

@_cdecl("LLVMFuzzerTestOneInput")
public func testOneInput(_ data: UnsafePointer<UInt8>?, _ size: Int) -> CInt {
    FuzzDriver.withInput(data, size) { FuzzJSON.run($0) }
    return 0
}

@main
struct Main {
    static func main() {
        FuzzJSON.prepare()
        FuzzDriver.main(testOneInput)
    }
}
