package actors

// A sampler's round or worker release can finish after the sampler
// stopped (the attempt ended while a call was on the wire); its result
// then reaches no one. That is expected: IgnoreDeadLetterLogging (Proto.
// Actor's marker) keeps it out of the dead-letter log, and the test
// harness (actortest) does not count it as a lost message.
func (roundDone) IgnoreDeadLetterLogging()   {}
func (releaseDone) IgnoreDeadLetterLogging() {}

// The attempt answers its lease watchdog's start (and tells it renewals)
// while the watchdog may already be stopping with the rest of the tree (an
// attempt refused at its first step): a lost answer changes nothing.
func (leaseRenewed) IgnoreDeadLetterLogging() {}

// A timer can fire just as its actor stops (Stop found it already
// firing): the tick then reaches no one, which is what stopping means.
func (sampleTick) IgnoreDeadLetterLogging()      {}
func (leaseTimerFired) IgnoreDeadLetterLogging() {}

// A build cancelled during its cache lookup reports at once and stops;
// its lookup, cancelled with it, then returns to no one (having taken no
// image reference: imagegc.Refs.Acquire ends with the build's context).
func (lookupResult) IgnoreDeadLetterLogging() {}
