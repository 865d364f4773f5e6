package actors

// A sampler's round or worker release can finish after the sampler
// stopped (the attempt ended while a call was on the wire); its result
// then reaches no one. That is expected: IgnoreDeadLetterLogging (Proto.
// Actor's marker) keeps it out of the dead-letter log, and the test
// harness (actortest) does not count it as a lost message.
func (roundDone) IgnoreDeadLetterLogging()   {}
func (releaseDone) IgnoreDeadLetterLogging() {}
