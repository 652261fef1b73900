import Testing

@testable import MiniFlake

/// 2026-11-22T10:15:30.123Z.
private let now: Int64 = 1_795_342_530_123
private let nowMilliseconds = now - FlakeID.epochUnixMilliseconds

private func expectIncreasing(_ ids: [FlakeID], sourceLocation: SourceLocation = #_sourceLocation) {
    for (a, b) in zip(ids, ids.dropFirst()) where !(a < b) {
        Issue.record("\(b) does not follow \(a)", sourceLocation: sourceLocation)
        return
    }
}

@Suite("FlakeMaker with a manual clock")
struct FlakeMakerTests {
    @Test("The first ID takes the clock's millisecond, sequence 0 and the instance")
    func firstID() throws {
        let clock = ManualFlakeClock(unixMilliseconds: now)
        var maker = try FlakeMaker(instance: 77, clock: clock)
        #expect(maker.lastIssued == nil)
        let id = try maker.next()
        #expect(id.milliseconds == nowMilliseconds)
        #expect(id.sequence == 0)
        #expect(id.instance == 77)
        #expect(id.rawValue == nowMilliseconds << 22 | 77)
        #expect(id.timestamp == "2026-11-22T10:15:30.123Z")
        #expect(maker.lastIssued == id)
        #expect(maker.instance == 77)
    }

    @Test("Same millisecond counts the sequence up; a new millisecond resets it")
    func sequence() throws {
        let clock = ManualFlakeClock(unixMilliseconds: now)
        var maker = try FlakeMaker(instance: 3, clock: clock)
        let ids = try (0..<5).map { _ in try maker.next() }
        #expect(ids.map(\.sequence) == [0, 1, 2, 3, 4])
        #expect(Set(ids.map(\.milliseconds)) == [nowMilliseconds])
        clock.advance(milliseconds: 7)
        let later = try maker.next()
        #expect(later.milliseconds == nowMilliseconds + 7)
        #expect(later.sequence == 0)
        expectIncreasing(ids + [later])
    }

    @Test("More than 4096 IDs in one millisecond borrow the next one")
    func borrowing() throws {
        let clock = ManualFlakeClock(unixMilliseconds: now)
        var maker = try FlakeMaker(instance: 9, clock: clock)
        let ids = try (0..<(3 * 4096 + 5)).map { _ in try maker.next() }
        expectIncreasing(ids)
        #expect(ids[4095].milliseconds == nowMilliseconds && ids[4095].sequence == 4095)
        #expect(ids[4096].milliseconds == nowMilliseconds + 1 && ids[4096].sequence == 0)
        #expect(ids.last?.milliseconds == nowMilliseconds + 3 && ids.last?.sequence == 4)
        #expect(clock.sleepCount == 0)
        for (index, id) in ids.enumerated() {
            let expected = (nowMilliseconds + Int64(index / 4096)) << 22 | Int64(index % 4096) << 10 | 9
            #expect(id.rawValue == expected)
        }
        // The clock catching up past borrowed time starts a fresh millisecond.
        clock.advance(milliseconds: 10)
        let fresh = try maker.next()
        #expect(fresh.milliseconds == nowMilliseconds + 10 && fresh.sequence == 0)
    }

    @Test("A small backward jump continues the last millisecond")
    func smallBackwardJump() throws {
        let clock = ManualFlakeClock(unixMilliseconds: now)
        var maker = try FlakeMaker(instance: 1, clock: clock)
        var ids = [try maker.next(), try maker.next()]
        clock.advance(milliseconds: -5)
        ids += try (0..<10).map { _ in try maker.next() }
        expectIncreasing(ids)
        #expect(ids.last?.milliseconds == nowMilliseconds)
        #expect(ids.last?.sequence == 11)
        // Once the clock passes the last millisecond again, it is followed.
        clock.advance(milliseconds: 6)
        let next = try maker.next()
        #expect(next.milliseconds == nowMilliseconds + 1 && next.sequence == 0)
    }

    @Test("A clock set back by years neither repeats IDs nor blocks for years")
    func yearsBackward() throws {
        let clock = ManualFlakeClock(unixMilliseconds: now)
        var maker = try FlakeMaker(instance: 5, clock: clock)
        let first = try maker.next()
        clock.advance(milliseconds: -3 * 365 * 86_400_000)
        let extraSleeps = 50
        // 4095 more in the first millisecond, 100 borrowed milliseconds, then one per credited sleep.
        let count = 4095 + (100 + extraSleeps) * 4096
        var previous = first
        for _ in 0..<count {
            let id = try maker.next()
            guard previous < id else {
                Issue.record("\(id) does not follow \(previous)")
                return
            }
            previous = id
        }
        #expect(clock.sleepCount == extraSleeps)
        #expect(previous.milliseconds == nowMilliseconds + 100 + Int64(extraSleeps))
        #expect(previous.sequence == 4095)
    }

    @Test(
        "Exactly (maxDrift + 1) * 4096 IDs before the first sleep",
        arguments: [Int64(0), 1, 5, 100]
    )
    func driftBound(maxDrift: Int64) throws {
        let clock = ManualFlakeClock(unixMilliseconds: now)
        var maker = try FlakeMaker(instance: 2, clock: clock, maxDriftMilliseconds: maxDrift)
        let free = Int(maxDrift + 1) * 4096
        var last = try maker.next()
        for _ in 1..<free {
            last = try maker.next()
        }
        #expect(clock.sleepCount == 0)
        #expect(last.milliseconds == nowMilliseconds + maxDrift && last.sequence == 4095)
        let first = try maker.next()
        #expect(clock.sleepCount == 1)
        #expect(first.milliseconds == nowMilliseconds + maxDrift + 1 && first.sequence == 0)
        // Sustained: one sleep per further 4096 IDs, never more than maxDrift ahead of the clock.
        for _ in 0..<(10 * 4096 - 1) {
            let id = try maker.next()
            #expect(id.milliseconds - (clock.unixMilliseconds() - FlakeID.epochUnixMilliseconds) <= maxDrift)
        }
        #expect(clock.sleepCount == 10)
    }

    @Test("The default drift bound is 100 ms")
    func defaultDrift() {
        #expect(FlakeMaker<ManualFlakeClock>.defaultMaxDriftMilliseconds == 100)
        #expect(FlakeMaker<SystemFlakeClock>.defaultMaxDriftMilliseconds == 100)
    }

    @Test("A restart after a high-water mark, with the clock set back, continues after the mark")
    func restartAfterHighWaterMark() throws {
        let clock = ManualFlakeClock(unixMilliseconds: now)
        var before = try FlakeMaker(instance: 12, clock: clock)
        let issued = try (0..<10_000).map { _ in try before.next() }
        let mark = try #require(before.lastIssued)
        #expect(mark == issued.last)

        clock.set(unixMilliseconds: now - 3_600_000)
        var after = try FlakeMaker(instance: 12, clock: clock, after: mark)
        #expect(after.lastIssued == mark)
        let next = try after.next()
        #expect(next > mark)
        #expect(next.milliseconds == mark.milliseconds && next.sequence == mark.sequence + 1)
        let more = try (0..<10_000).map { _ in try after.next() }
        expectIncreasing([mark, next] + more)
        #expect(Set(issued).isDisjoint(with: more))
    }

    @Test("A high-water mark at sequence 4095 moves to the next millisecond")
    func highWaterMarkAtLastSequence() throws {
        let clock = ManualFlakeClock(unixMilliseconds: now - 1000)
        let mark = try FlakeID(milliseconds: nowMilliseconds, sequence: 4095, instance: 1023)
        var maker = try FlakeMaker(instance: 0, clock: clock, after: mark)
        let next = try maker.next()
        #expect(next > mark)
        #expect(next.milliseconds == nowMilliseconds + 1 && next.sequence == 0 && next.instance == 0)
    }

    @Test("A mark from another instance still orders every new ID after it")
    func highWaterMarkOtherInstance() throws {
        let clock = ManualFlakeClock(unixMilliseconds: now - 1000)
        let mark = try FlakeID(milliseconds: nowMilliseconds, sequence: 17, instance: 900)
        var maker = try FlakeMaker(instance: 4, clock: clock, after: mark)
        #expect(maker.lastIssued == mark)
        let next = try maker.next()
        #expect(next > mark)
        #expect(maker.lastIssued == next)
    }

    @Test("A clock ahead of the high-water mark is followed")
    func clockAheadOfMark() throws {
        let clock = ManualFlakeClock(unixMilliseconds: now)
        let mark = try FlakeID(milliseconds: nowMilliseconds - 5000, sequence: 3, instance: 1)
        var maker = try FlakeMaker(instance: 1, clock: clock, after: mark)
        let next = try maker.next()
        #expect(next.milliseconds == nowMilliseconds && next.sequence == 0)
    }

    @Test("At the 2087 boundary the maker throws instead of wrapping")
    func timeRangeExhausted() throws {
        let last = FlakeID.epochUnixMilliseconds + FlakeID.maxMilliseconds
        let clock = ManualFlakeClock(unixMilliseconds: last)
        var maker = try FlakeMaker(instance: 1023, clock: clock)
        var ids: [FlakeID] = []
        for _ in 0...FlakeID.maxSequence {
            ids.append(try maker.next())
        }
        #expect(ids.allSatisfy { $0.rawValue > 0 })
        #expect(ids.last?.rawValue == .max)
        #expect(ids.last?.timestamp == "2087-11-05T15:47:35.551Z")
        #expect(throws: FlakeError.timeRangeExhausted) { try maker.next() }
        #expect(throws: FlakeError.timeRangeExhausted) { try maker.next() }
        #expect(maker.lastIssued?.rawValue == .max)
        #expect(clock.sleepCount == 0)

        // A clock past the end throws at once.
        clock.advance(milliseconds: 1)
        var late = try FlakeMaker(instance: 0, clock: clock)
        #expect(throws: FlakeError.timeRangeExhausted) { try late.next() }
        #expect(late.lastIssued == nil)

        // So does a restart after the last possible ID.
        clock.set(unixMilliseconds: now)
        var restarted = try FlakeMaker(instance: 5, clock: clock, after: FlakeID(validating: .max))
        #expect(throws: FlakeError.timeRangeExhausted) { try restarted.next() }
    }

    @Test("A clock before the epoch reads as the epoch, and never yields ID 0")
    func beforeEpoch() throws {
        let clock = ManualFlakeClock(unixMilliseconds: 0)
        var zero = try FlakeMaker(instance: 0, clock: clock)
        let first = try zero.next()
        #expect(first.milliseconds == 0 && first.rawValue > 0)
        #expect(first.sequence == 1)
        var one = try FlakeMaker(instance: 1, clock: clock)
        let id = try one.next()
        #expect(id.rawValue == 1)
    }

    @Test("Instance numbers outside 0...1023 are rejected", arguments: [-1, 1024, Int.min, Int.max])
    func instanceBounds(instance: Int) throws {
        let clock = ManualFlakeClock(unixMilliseconds: now)
        #expect(throws: FlakeError.instanceOutOfRange(instance)) { try FlakeMaker(instance: instance, clock: clock) }
        #expect(throws: FlakeError.instanceOutOfRange(instance)) { try FlakeGenerator(instance: instance, clock: clock) }
        #expect(throws: FlakeError.instanceOutOfRange(instance)) { try FlakeMaker(instance: instance) }
        #expect(throws: FlakeError.instanceOutOfRange(instance)) { try FlakeGenerator(instance: instance) }
    }

    @Test("Instances 0 and 1023 are accepted")
    func instanceEdges() throws {
        let clock = ManualFlakeClock(unixMilliseconds: now)
        var low = try FlakeMaker(instance: 0, clock: clock)
        var high = try FlakeMaker(instance: 1023, clock: clock)
        #expect(try low.next().instance == 0)
        #expect(try high.next().instance == 1023)
    }

    @Test("FlakeGenerator wraps a maker: next, next(count:), lastIssued")
    func generator() throws {
        let clock = ManualFlakeClock(unixMilliseconds: now)
        let generator = try FlakeGenerator(instance: 44, clock: clock, maxDriftMilliseconds: 0)
        #expect(generator.instance == 44)
        #expect(generator.lastIssued == nil)
        let one = try generator.next()
        let batch = try generator.next(count: 5000)
        #expect(batch.count == 5000)
        expectIncreasing([one] + batch)
        #expect(generator.lastIssued == batch.last)
        #expect(clock.sleepCount == 1)  // maxDrift 0: the 4097th ID waits for the clock
        #expect(try generator.next(count: 0).isEmpty)
    }

    @Test("The system clocks agree with each other and with Foundation")
    func systemClocks() throws {
        let coarse = SystemFlakeClock.coarse.unixMilliseconds()
        let precise = SystemFlakeClock.precise.unixMilliseconds()
        #expect(abs(precise - coarse) < 50)
        let start = SystemFlakeClock.precise.unixMilliseconds()
        SystemFlakeClock.precise.sleep(milliseconds: 5)
        #expect(SystemFlakeClock.precise.unixMilliseconds() - start >= 5)
        var maker = try FlakeMaker(instance: 1)
        let id = try maker.next()
        #expect(abs(id.unixMilliseconds - SystemFlakeClock.precise.unixMilliseconds()) < 50)
    }

    @Test("ManualFlakeClock moves only when told")
    func manualClock() {
        let clock = ManualFlakeClock(unixMilliseconds: 1000)
        #expect(clock.unixMilliseconds() == 1000)
        clock.advance(milliseconds: 5)
        clock.sleep(milliseconds: 3)
        #expect(clock.unixMilliseconds() == 1008)
        #expect(clock.sleepCount == 1)
        clock.set(unixMilliseconds: 10)
        #expect(clock.unixMilliseconds() == 10)
    }
}
