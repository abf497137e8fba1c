import FuzzTargets

// See FuzzTargets/FuzzConfiguration.swift for what this covers; docs/reliability.md for how to run it.

@_cdecl("LLVMFuzzerTestOneInput")
public func testOneInput(_ data: UnsafePointer<UInt8>?, _ size: Int) -> CInt {
    FuzzDriver.withInput(data, size) { FuzzConfiguration.run($0) }
    return 0
}

@main
struct Main {
    static func main() {
        FuzzConfiguration.prepare()
        FuzzDriver.main(testOneInput)
    }
}
