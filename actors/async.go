package actors

import "github.com/forgedev/forged/internal/kit/actorkit"

// runAsync and asyncPanic are the actors' names for the shared helpers.
var runAsync = actorkit.Go

type asyncPanic = actorkit.Panic
