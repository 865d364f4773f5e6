// Package services defines the sidecar services a sandbox contract may
// declare (postgres, redis, browser): the operator's
// catalogue of digest-pinned service images and its admission check, each
// service's hardened container recipe, its per-attempt credentials, the
// connection details handed to the worker, and the arguments of the
// readiness probes that speak each service's own protocol (package probe,
// run inside a probe container by the worker binary).
//
// The catalogue is operator configuration, written by
// scripts/service-images.sh: one service a line, tab-separated, with the
// image reference and the image id it is pinned to. Admission checks every
// declared service against it before any Docker object exists: a service
// without an entry, or whose image is not in the engine, is refused with
// sandbox_service_unavailable; an image whose id is not the pinned one with
// sandbox_service_image_mismatch. Containers are created from the pinned
// id, never from the tag, and nothing is ever pulled.
package services
