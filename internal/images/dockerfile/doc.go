// Package dockerfile reads a project's Dockerfile as the classic builder
// does (parser directives, comments, line continuations, instruction
// flags) and applies forged's build policy to it before any build:
//
//   - under every policy, no ADD (nor ONBUILD ADD) fetches a URL: the engine
//     fetches those itself, outside the build's network confinement;
//   - under sandbox_required, every upstream image (FROM, COPY --from) is
//     pinned by digest, with no build-argument substitution, and no
//     "# syntax=" frontend is named: nothing may need a registry. That the
//     pinned images are present locally is the caller's check, against the
//     engine (UpstreamImages lists them).
//
// A violation is failure.SandboxBuildPolicy, naming the line.
package dockerfile
