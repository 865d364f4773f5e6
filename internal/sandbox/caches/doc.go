// Package caches mounts a sandbox contract's package caches (npm, pnpm,
// yarn, nuget, cargo, pip) into the worker, warms the per-project ones and
// collects old cache volumes.
//
// # Modes
//
//   - per_attempt: a fresh volume per attempt, named
//     forge-<attempt hex>-cache-<name> and labelled with the attempt's
//     ownership like its workspace, so the ledger, the teardown and the
//     reaper remove it with the attempt's other volumes. With bounded
//     volumes (package quota) it is a fixed-size ext4 image of the
//     operator's cache size whose root the worker owns; otherwise the
//     engine's copy-up gives it the owner of the agent image's skeleton
//     directory (dockerops.OverlayContext). It starts empty.
//   - readonly: a per-project volume, named
//     forge-cache-<16 hex of sha256(project)>-<name>, labelled with the
//     project and the cache, mounted read-only and never copied into. Only
//     the operator fills it, with Warm (`forged cache warm`), which runs a
//     given command in a given toolchain image with the volume mounted
//     read-write. The warm-up runs as root inside its container (every
//     capability dropped), so the cache's files belong to root and are
//     readable, not writable, by the worker's uid even before the
//     read-only mount. An attempt whose project has no warmed volume runs
//     without it (the cache event says so).
//
// # Where each tool looks
//
// Each cache is mounted at a direct child of HOME (/home/forge, see
// contract.CacheTargets for why not at the seed's deeper paths), and the
// tool's own variable names that place (Env): npm_config_cache
// (~/.npm, the seed's), npm_config_store_dir (pnpm, ~/.pnpm-store),
// YARN_CACHE_FOLDER (~/.yarn-cache), NUGET_PACKAGES (~/.nuget-packages),
// CARGO_HOME (~/.cargo: the whole of cargo's home, whose registry/ the
// seed mounts) and PIP_CACHE_DIR (~/.pip-cache). A read-only cargo cache
// is a read-only CARGO_HOME: cargo must run offline against it and
// may fail to take its package-cache lock there, so per_attempt is the mode
// for cargo.
//
// # Policy and collection
//
// Policy says which modes the operator allows (`--cache-modes`); a contract
// declaring another is refused before anything is created with
// failure.SandboxCachesUnsupported. Collect removes cache volumes (both
// modes: they carry LabelCache) older than a maximum age, never one a
// container uses, with a dry run that removes nothing (`forged gc`).
package caches
