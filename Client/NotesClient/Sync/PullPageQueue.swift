import NoteSyncProtocol

/// The pages of one pull, fetched ahead of the store (``SyncEngine``'s pull, issue 30): a task asks for page n + 1
/// as soon as page n names its cursor and puts each answer here, while the pull's loop takes them and writes them
/// to the store a group at a time. The requests are the same, in the same order, as one page at a time.
///
/// Bounded: the fetching task waits while the pages held here carry `capacity` notes or more, so a pull holds at
/// most about one group being written plus `capacity` notes fetched ahead, whatever the account's size.
actor PullPageQueue {
    private var answers: [Result<PullResponse, NotesError>] = []
    private var heldNotes = 0
    private let capacity: Int
    private var closed = false
    private var taker: CheckedContinuation<Void, Never>?
    private var putter: CheckedContinuation<Void, Never>?

    init(capacity: Int) {
        self.capacity = capacity
    }

    /// Starts fetching from `cursor` with `fetch` (one request per page, each from the cursor the last named),
    /// until the last page, a failure, or ``close()``. Returns the fetching task.
    func startFetching(
        from cursor: String, with fetch: @escaping @Sendable (String) async -> Result<PullResponse, NotesError>
    ) -> Task<Void, Never> {
        Task {
            var since = cursor
            while !Task.isCancelled {
                let answer = await fetch(since)
                guard await put(answer), case .success(let page) = answer, page.hasMore else { return }
                // A page that announces more without moving on is refused by the pull's loop; fetch no further.
                guard page.cursor.text != since || !page.changes.isEmpty else { return }
                since = page.cursor.text
            }
        }
    }

    /// Adds an answer, after waiting while the queue is full. Returns false, dropping it, once closed.
    private func put(_ answer: Result<PullResponse, NotesError>) async -> Bool {
        while !closed, heldNotes >= capacity {
            await withCheckedContinuation { putter = $0 }
        }
        guard !closed else { return false }
        answers.append(answer)
        if case .success(let page) = answer { heldNotes += page.changes.count }
        taker?.resume()
        taker = nil
        return true
    }

    /// The next answer, in order, after waiting for it.
    func take() async -> Result<PullResponse, NotesError> {
        while answers.isEmpty {
            await withCheckedContinuation { taker = $0 }
        }
        let answer = answers.removeFirst()
        if case .success(let page) = answer { heldNotes -= page.changes.count }
        putter?.resume()
        putter = nil
        return answer
    }

    /// Stops the fetching: a fetch under way completes, and its answer is dropped.
    func close() {
        closed = true
        answers.removeAll()
        putter?.resume()
        putter = nil
    }
}
