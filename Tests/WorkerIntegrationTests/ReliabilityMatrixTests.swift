import Foundation
import Logging
import ReliabilityMatrix
import TestPeers
import Testing

/// The short run of the reliability matrix (`make reliability` runs all of it, longer): one fault of
/// each kind, on the broker where only a real peer shows it (`Scenario.quick`), counted as a
/// downstream consumer sees the topics.
@Suite("The reliability matrix, short run", .serialized, .timeLimit(.minutes(10)))
struct ReliabilityMatrixTests {
    static let cases: [(String, Broker)] = Scenario.quick.flatMap { row in
        row.brokers.map { (row.name, $0) }
    }

    @Test("every event ends with a result, and every failure with a dead letter", arguments: cases)
    func scenario(_ name: String, _ broker: Broker) async throws {
        let scenario = try #require(Scenario.all.first { $0.name == name })
        #expect(scenario.brokers.contains(broker))
        var logger = Logger(label: "reliability")
        logger.logLevel = .critical
        let row = await ReliabilityMatrix.run(scenario, on: broker, scale: .quick, logger: logger)
        print(ReliabilityMatrix.line(row))
        #expect(row.failure == nil)
        #expect(row.eventsIn >= Scale.quick.events)
        #expect(row.results == row.eventsIn)
        #expect(row.lost == 0)
    }
}
