package caches

import (
	"github.com/forgedev/forged/internal/sandbox/contract"
)

// envOf maps each cache to the variables that make its tool use the
// mounted directory. Targets are contract.CacheTargets.
var envOf = map[string][]string{
	"npm":   {"npm_config_cache=" + contract.CacheTargets["npm"]},
	"pnpm":  {"npm_config_store_dir=" + contract.CacheTargets["pnpm"]},
	"yarn":  {"YARN_CACHE_FOLDER=" + contract.CacheTargets["yarn"]},
	"nuget": {"NUGET_PACKAGES=" + contract.CacheTargets["nuget"]},
	"cargo": {"CARGO_HOME=" + contract.CacheTargets["cargo"]},
	"pip":   {"PIP_CACHE_DIR=" + contract.CacheTargets["pip"]},
}

// Env returns the environment of the declared caches, in the contract's
// order. Unknown names (which contract.Parse refuses) give nothing.
func Env(cs []contract.Cache) []string {
	var out []string
	for _, c := range cs {
		out = append(out, envOf[c.Name]...)
	}
	return out
}

// Target is where the cache is mounted in the worker, and whether the
// name is known.
func Target(name string) (string, bool) {
	t, ok := contract.CacheTargets[name]
	return t, ok
}
