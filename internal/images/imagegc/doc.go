// Package imagegc removes the sandbox images forged built and no longer
// needs. Images are grouped by cache key (the project and agent images of
// one key go together) and by project. Per project the newest KeepPerProject
// keys are kept; of the others, those older than MaxAge are removed. A key
// in use (given by the caller: the keys of live or queued attempts) and an
// image any container uses are never removed. Dangling images carrying
// forged's image label are pruned too.
//
// Age is the image's creation time: the engine keeps no last-use time, so
// a key still hit by every attempt but built long ago is removed once it
// is not among its project's newest.
package imagegc
