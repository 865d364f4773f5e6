package supervisor

// A timer can fire just as its actor stops (Stop found it already
// firing): the tick then reaches no one, which is what stopping means.
// IgnoreDeadLetterLogging (Proto.Actor's marker) keeps it out of the
// dead-letter log, and the test harness (actortest) does not count it.
func (reapTick) IgnoreDeadLetterLogging()      {}
func (refreshTick) IgnoreDeadLetterLogging()   {}
func (respawnReaper) IgnoreDeadLetterLogging() {}
