import FuzzSimulatorTarget
import FuzzTargets

// See FuzzTargets/FuzzSimulator.swift for what this covers; docs/reliability.md for how to run it.

@_cdecl("LLVMFuzzerTestOneInput")
public func testOneInput(_ data: UnsafePointer<UInt8>?, _ size: Int) -> CInt {
    FuzzDriver.withInput(data, size) { FuzzSimulator.run($0) }
    return 0
}

@main
struct Main {
    static func main() {
        FuzzSimulator.prepare()
        FuzzDriver.main(testOneInput)
    }
}
