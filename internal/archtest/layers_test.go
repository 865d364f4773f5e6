package archtest

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"sort"
	"strings"
	"testing"
)

// module is the module path every product package lies below.
const module = "github.com/forgedev/forged"

// The layers, lowest first; docs/architecture.md ("Layers") writes them
// down. A package may import packages of its own layer or of a lower one,
// never of a higher one.
const (
	layerKit        = iota // internal/kit/*: small leaf kits
	layerFailure           // failure: the code registry
	layerMessages          // messages: the actor messages and documents
	layerDomain            // host, image, sandbox and worker leaves: no engine adapter
	layerAdapters          // dockerops, gitops: the engine and host git
	layerServices          // state, publication, sidecars, caches, collector, example, metrics, config
	layerActors            // actors: the attempt tree
	layerSupervisor        // supervisor: the root actor
	layerDaemon            // internal/daemon/{runner,httpapi}, client
	layerTools             // internal/bench
	layerCmd               // cmd/*
	layerTestKit           // actortest, internal/testkit, internal/archtest: may import anything
)

var layerNames = map[int]string{
	layerKit:        "kit",
	layerFailure:    "failure",
	layerMessages:   "messages",
	layerDomain:     "domain",
	layerAdapters:   "adapters",
	layerServices:   "services",
	layerActors:     "actors",
	layerSupervisor: "supervisor",
	layerDaemon:     "daemon",
	layerTools:      "tools",
	layerCmd:        "cmd",
	layerTestKit:    "testkit",
}

// placement puts a package (its path below the module, or a prefix of
// such paths ending in "/") in a layer. The longest matching entry wins,
// so a group's default comes with its exceptions.
var placement = map[string]int{
	"internal/kit/": layerKit,

	"failure":  layerFailure,
	"failure/": layerFailure,

	"messages":  layerMessages,
	"messages/": layerMessages,

	"internal/host/":                  layerDomain,
	"internal/images/":                layerDomain,
	"internal/images/collector":       layerServices,
	"internal/sandbox/":               layerServices,
	"internal/sandbox/contract":       layerDomain,
	"internal/sandbox/egress":         layerDomain,
	"internal/sandbox/lease":          layerDomain,
	"internal/sandbox/services/probe": layerDomain,
	"internal/sandbox/timelimit":      layerDomain,
	"internal/sandbox/toolchains":     layerDomain,
	"internal/worker":                 layerDomain,
	"internal/worker/":                layerDomain,

	"dockerops":  layerAdapters,
	"dockerops/": layerAdapters,
	"gitops":     layerAdapters,
	"gitops/":    layerAdapters,

	"internal/state/":         layerServices,
	"internal/publish/":       layerServices,
	"internal/example":        layerServices,
	"internal/daemon/metrics": layerServices,
	"internal/daemon/config":  layerServices,

	"actors":  layerActors,
	"actors/": layerActors,

	"supervisor":  layerSupervisor,
	"supervisor/": layerSupervisor,

	"internal/daemon/": layerDaemon,
	"internal/fleet":   layerDaemon,
	"internal/fleet/":  layerDaemon,
	"client":           layerDaemon,
	"client/":          layerDaemon,

	"internal/bench": layerTools,

	"cmd/": layerCmd,

	"actortest":         layerTestKit,
	"actortest/":        layerTestKit,
	"internal/testkit/": layerTestKit,
	"internal/archtest": layerTestKit,
}

// layerOf returns the layer of the package at rel (its path below the
// module), or false when no entry places it.
func layerOf(rel string) (int, bool) {
	best, layer := -1, 0
	for key, l := range placement {
		match := rel == key || (strings.HasSuffix(key, "/") && strings.HasPrefix(rel, key))
		if match && len(key) > best {
			best, layer = len(key), l
		}
	}
	return layer, best >= 0
}

// goPackage is one package of the module as `go list` reports it.
type goPackage struct {
	rel     string   // path below the module ("" for the root)
	imports []string // the module's packages it imports, non-test, below the module
}

// goTool finds the go command: on PATH, else the running toolchain's.
func goTool(t *testing.T) string {
	t.Helper()
	if p, err := exec.LookPath("go"); err == nil {
		return p
	}
	p := filepath.Join(runtime.GOROOT(), "bin", "go")
	if _, err := os.Stat(p); err != nil {
		t.Fatalf("no go command on PATH or in GOROOT (%s): %v", runtime.GOROOT(), err)
	}
	return p
}

// moduleRoot is the directory holding go.mod, two levels up.
func moduleRoot(t *testing.T) string {
	t.Helper()
	root, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(root, "go.mod")); err != nil {
		t.Fatalf("module root %s: %v", root, err)
	}
	return root
}

// listPackages runs `go list` over the module and returns every package
// with its non-test imports inside the module.
func listPackages(t *testing.T) []goPackage {
	t.Helper()
	cmd := exec.Command(goTool(t), "list", "-e", "-f", "{{.ImportPath}}\t{{join .Imports \" \"}}\t{{if .Error}}{{.Error}}{{end}}", "./...")
	cmd.Dir = moduleRoot(t)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list ./...: %v\n%s", err, stderr.String())
	}
	var pkgs []goPackage
	sc := bufio.NewScanner(bytes.NewReader(out))
	for sc.Scan() {
		fields := strings.Split(sc.Text(), "\t")
		if len(fields) != 3 {
			t.Fatalf("go list: unexpected line %q", sc.Text())
		}
		if fields[2] != "" {
			t.Fatalf("go list: %s: %s", fields[0], fields[2])
		}
		rel, ok := below(fields[0])
		if !ok {
			t.Fatalf("go list: %s is not below %s", fields[0], module)
		}
		p := goPackage{rel: rel}
		for _, imp := range strings.Fields(fields[1]) {
			if r, ok := below(imp); ok {
				p.imports = append(p.imports, r)
			}
		}
		pkgs = append(pkgs, p)
	}
	if len(pkgs) == 0 {
		t.Fatal("go list ./... found no package")
	}
	return pkgs
}

// below returns path relative to the module, and whether it lies in it.
func below(path string) (string, bool) {
	if path == module {
		return "", true
	}
	rel, ok := strings.CutPrefix(path, module+"/")
	return rel, ok
}

// violations returns every import of pkgs that breaks the layers: one
// from a lower layer to a higher one, and a product package importing a
// test kit. Packages no entry places are reported too.
func violations(pkgs []goPackage) []string {
	var out []string
	for _, p := range pkgs {
		from, ok := layerOf(p.rel)
		if !ok {
			out = append(out, fmt.Sprintf("%s is in no layer: place it in internal/archtest's table and docs/architecture.md", display(p.rel)))
			continue
		}
		for _, imp := range p.imports {
			to, ok := layerOf(imp)
			if !ok {
				continue // reported as a package of its own
			}
			switch {
			case to == layerTestKit && from != layerTestKit:
				out = append(out, fmt.Sprintf("%s (%s) imports the test kit %s", display(p.rel), layerNames[from], imp))
			case to > from && to != layerTestKit:
				out = append(out, fmt.Sprintf("%s (%s) imports %s (%s), a higher layer", display(p.rel), layerNames[from], imp, layerNames[to]))
			}
		}
	}
	sort.Strings(out)
	return out
}

func display(rel string) string {
	if rel == "" {
		return "the module root"
	}
	return rel
}

// TestNoImportRunsUpTheLayers holds the whole module to the layers of
// docs/architecture.md: every package is placed in a layer, no non-test
// import runs from a lower layer to a higher one, and no product package
// imports a test kit.
func TestNoImportRunsUpTheLayers(t *testing.T) {
	for _, v := range violations(listPackages(t)) {
		t.Error(v)
	}
}

// TestLayerRulesCatchBackArrows checks the rule itself on a made-up tree,
// so the test above cannot pass by accepting everything.
func TestLayerRulesCatchBackArrows(t *testing.T) {
	pkgs := []goPackage{
		{rel: "messages", imports: []string{"failure", "internal/kit/strictjson", "internal/host/quota"}},
		{rel: "internal/daemon/runner", imports: []string{"actors", "supervisor", "internal/daemon/metrics"}},
		{rel: "internal/daemon/metrics", imports: []string{"actors", "messages"}},
		{rel: "dockerops", imports: []string{"internal/testkit/enginetest", "internal/host/preflight"}},
		{rel: "actortest/scenario", imports: []string{"actors", "supervisor", "internal/worker", "internal/testkit/testimages"}},
		{rel: "internal/sandbox/services", imports: []string{"dockerops"}},
		{rel: "internal/sandbox/contract", imports: []string{"dockerops"}},
		{rel: "internal/newthing"},
	}
	got := violations(pkgs)
	want := []string{
		"dockerops (adapters) imports the test kit internal/testkit/enginetest",
		"internal/daemon/metrics (services) imports actors (actors), a higher layer",
		"internal/newthing is in no layer: place it in internal/archtest's table and docs/architecture.md",
		"internal/sandbox/contract (domain) imports dockerops (adapters), a higher layer",
		"messages (messages) imports internal/host/quota (domain), a higher layer",
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("violations:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

// topLevelDirs are the directories the design card allows at the top:
// its six parts, the public packages, internal/, the documentation, the
// scripts, contrib/, CI's directory, proto/ for the fleet's message
// definitions, and bin/ (untracked build output, never listed by git).
var topLevelDirs = map[string]bool{
	"actors": true, "messages": true, "supervisor": true, "dockerops": true, "gitops": true, "cmd": true,
	"actortest": true, "failure": true, "client": true,
	"internal": true, "docs": true, "scripts": true, "contrib": true, ".ci": true, "proto": true,
}

// topLevelViolations returns what breaks the card's top level among the
// repository's file paths (slash-separated, relative to the root): a
// directory the card does not name, and Go code at the top (a root
// package). Top-level files (README.md, BENCHMARKS.*, go.mod, ...) are
// allowed.
func topLevelViolations(paths []string) []string {
	var out []string
	seen := map[string]bool{}
	for _, path := range paths {
		top, _, isDir := strings.Cut(path, "/")
		if top == "" || seen[top] {
			continue
		}
		seen[top] = true
		switch {
		case isDir && !topLevelDirs[top]:
			out = append(out, fmt.Sprintf("top-level directory %s/ is not one the design card allows: move it under internal/ (or docs/, scripts/)", top))
		case !isDir && strings.HasSuffix(top, ".go"):
			out = append(out, fmt.Sprintf("top-level Go file %s: the module root holds no package", top))
		}
	}
	sort.Strings(out)
	return out
}

// TestTopLevelHoldsOnlyTheCardsParts holds the repository's files, tracked
// or not yet (but not ignored, so bin/ is left out), to the card's top
// level.
func TestTopLevelHoldsOnlyTheCardsParts(t *testing.T) {
	root := moduleRoot(t)
	cmd := exec.Command("git", "ls-files", "-z", "--cached", "--others", "--exclude-standard")
	cmd.Dir = root
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("git ls-files in %s: %v (the check reads the repository's files)", root, err)
	}
	paths := strings.Split(strings.TrimRight(string(out), "\x00"), "\x00")
	if len(paths) < 2 {
		t.Fatalf("git ls-files in %s listed %d files", root, len(paths))
	}
	for _, v := range topLevelViolations(paths) {
		t.Error(v)
	}
}

// TestTopLevelRuleCatchesStrayDirectories checks the rule itself.
func TestTopLevelRuleCatchesStrayDirectories(t *testing.T) {
	got := topLevelViolations([]string{
		"README.md", "go.mod", "BENCHMARKS.json", ".gitignore",
		"actors/attempt.go", "internal/kit/text/clip.go", ".ci/run", "docs/architecture.md",
		"runner/runner.go", "runner/identity.go", "main.go", "tools/gen/x.go",
	})
	want := []string{
		"top-level Go file main.go: the module root holds no package",
		"top-level directory runner/ is not one the design card allows: move it under internal/ (or docs/, scripts/)",
		"top-level directory tools/ is not one the design card allows: move it under internal/ (or docs/, scripts/)",
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("violations:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}
