/// The journal writer's state machine: what is queued, when it is next committed, and whether a
/// commit is under way. Its transitions, under the writer's lock, say what to do once the lock
/// is let go (``JournalWriter/Next``): nothing, commit now, or arm the one timer.
extension JournalWriter {
    /// When the queued writes will next be committed.
    enum DrainSchedule: Equatable {
        case none
        /// Only writes nobody waits for are queued: they wait for a write somebody does wait for, or
        /// a few milliseconds (the wait numbered `State.waits`).
        case later
        case now
    }

    /// What to do once the state's lock is let go.
    enum Next {
        case nothing
        /// Commit on the queue, now.
        case drain
        /// Arm the one timer for the wait numbered so, to fire after the duration.
        case armTimer(UInt64, after: Duration)
    }

    /// What the writer holds under its lock.
    struct State {
        var queue = WriteQueue()
        /// Posted commands' write-aheads (``writeAhead(_:whenDurable:)``) and flushes, in order:
        /// each drain commits everything in `queue` and then up to ``JournalWriter/writeAheadsPerCommit``
        /// of these. A burst of posts queues its write-aheads far faster than they commit; in the
        /// one queue a `send` waited behind all of them (a burst of 100,000 posts committed in
        /// transactions of 30,000 writes), where here its writes go in the next commit.
        var writeAheads: [PendingWrite] = []
        var scheduled = DrainSchedule.none
        /// The number of the latest wait for company (``DrainSchedule/later``), so a timer armed
        /// for an earlier one (whose writes a commit took: usually a command's ending took its
        /// `running`) does not commit this one's early when it fires.
        var waits: UInt64 = 0
        /// When the latest wait for company began.
        var waitingSince = ContinuousClock.now
        /// A timer is armed and has not fired. At most one is: a wait that begins meanwhile is
        /// left to it, and it re-arms for the rest of that wait when it fires. A timer for each wait
        /// cost a sequence of journaled commands a `timerfd_settime` and an `epoll_ctl` on
        /// Dispatch's timer thread, and a wake 5 ms later, per command.
        var timerArmed = false
        /// A commit is under way, on the queue or a caller's thread; whoever ends it starts the next.
        var committing = false

        /// A new wait for company: the timer to arm, unless one is armed already.
        mutating func beginWaiting() -> Next {
            waits &+= 1
            scheduled = .later
            waitingSince = .now
            return timerArmed ? .nothing : armTimer()
        }

        /// Arms the timer for the rest of the current wait (`scheduled` is `.later`).
        mutating func armTimer() -> Next {
            timerArmed = true
            return .armTimer(waits, after: waitingSince + SQLiteJournal.unwaitedWriteDelay - .now)
        }

        /// Queues `write`, in the lane of posted write-aheads and flushes if `toLane`, and says
        /// what starts its commit: at once if `urgent`, else after a wait for company.
        mutating func enqueue(_ write: consuming PendingWrite, toLane: Bool, urgent: Bool) -> Next {
            if toLane {
                writeAheads.append(write)
            } else {
                queue.append(write)
            }
            switch (scheduled, urgent) {
            case (.now, _), (.later, false):
                return .nothing
            case (_, true):
                scheduled = .now
                // A commit under way starts the next drain when it ends.
                return committing ? .nothing : .drain
            case (.none, false):
                return beginWaiting()
            }
        }
    }
}
