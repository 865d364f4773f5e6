package imagegc

import (
	"cmp"
	"slices"
	"time"
)

// Image labels set by forged's builds.
const (
	LabelManaged = "dev.forge.managed-image"
	LabelProject = "dev.forge.project"
	LabelKey     = "dev.forge.image-key"
	LabelKind    = "dev.forge.image-kind"
)

// Image is one forged image, as listed by the engine.
type Image struct {
	ID         string    `json:"id"`
	Tags       []string  `json:"tags"`
	Project    string    `json:"project"`
	Key        string    `json:"key"`
	Kind       string    `json:"kind"`
	Created    time.Time `json:"created"`
	Bytes      int64     `json:"bytes"`
	Containers int64     `json:"containers"` // containers (running or not) using it
}

// Policy says what to keep.
type Policy struct {
	KeepPerProject int           // newest keys kept per project; at least 1 (default 3)
	MaxAge         time.Duration // older keys beyond the newest are removed; at least 1 minute (default 7 days)
	// AuditKeep and AuditMaxAge bound the stored build logs (PurgeAudit):
	// the newest AuditKeep keys' logs are kept while younger than
	// AuditMaxAge (defaults DefaultAuditKeep and DefaultAuditMaxAge; at
	// least one key and an hour).
	AuditKeep   int
	AuditMaxAge time.Duration
}

func (p Policy) withDefaults() Policy {
	if p.KeepPerProject <= 0 {
		p.KeepPerProject = 3
	}
	if p.MaxAge <= 0 {
		p.MaxAge = 7 * 24 * time.Hour
	}
	p.MaxAge = max(p.MaxAge, time.Minute)
	if p.AuditKeep <= 0 {
		p.AuditKeep = DefaultAuditKeep
	}
	if p.AuditMaxAge <= 0 {
		p.AuditMaxAge = DefaultAuditMaxAge
	}
	p.AuditMaxAge = max(p.AuditMaxAge, MinAuditMaxAge)
	return p
}

// Decision is one image and why it is kept or removed.
type Decision struct {
	Image
	Reason string `json:"reason"`
}

// Reasons.
const (
	ReasonInUse     = "in use by an attempt"
	ReasonContainer = "used by a container"
	ReasonNewest    = "among the project's newest"
	ReasonYoung     = "younger than the maximum age"
	ReasonExpired   = "older than the maximum age and not among the project's newest"
)

// Plan is what one collection keeps and removes.
type Plan struct {
	Keep   []Decision `json:"keep"`
	Remove []Decision `json:"remove"`
}

// Select plans a collection at now. inUse holds the cache keys that must
// stay (live and queued attempts'). Every image of a key shares the key's
// fate, except that an image a container uses is always kept.
func Select(images []Image, inUse map[string]bool, policy Policy, now time.Time) Plan {
	policy = policy.withDefaults()
	type key struct {
		project, key string
		newest       time.Time
		images       []Image
	}
	keys := map[[2]string]*key{}
	for _, img := range images {
		id := [2]string{img.Project, img.Key}
		k := keys[id]
		if k == nil {
			k = &key{project: img.Project, key: img.Key}
			keys[id] = k
		}
		k.images = append(k.images, img)
		if img.Created.After(k.newest) {
			k.newest = img.Created
		}
	}
	byProject := map[string][]*key{}
	for _, k := range keys {
		byProject[k.project] = append(byProject[k.project], k)
	}
	var plan Plan
	cutoff := now.Add(-policy.MaxAge)
	for _, group := range byProject {
		slices.SortFunc(group, func(a, b *key) int {
			return cmp.Or(b.newest.Compare(a.newest), cmp.Compare(a.key, b.key))
		})
		for rank, k := range group {
			reason := ReasonExpired
			switch {
			case inUse[k.key]:
				reason = ReasonInUse
			case rank < policy.KeepPerProject:
				reason = ReasonNewest
			case k.newest.After(cutoff):
				reason = ReasonYoung
			}
			for _, img := range k.images {
				switch {
				case reason != ReasonExpired:
					plan.Keep = append(plan.Keep, Decision{img, reason})
				case img.Containers > 0:
					plan.Keep = append(plan.Keep, Decision{img, ReasonContainer})
				default:
					plan.Remove = append(plan.Remove, Decision{img, reason})
				}
			}
		}
	}
	order := func(a, b Decision) int {
		return cmp.Or(cmp.Compare(a.Project, b.Project), b.Created.Compare(a.Created), cmp.Compare(a.Kind, b.Kind), cmp.Compare(a.ID, b.ID))
	}
	slices.SortFunc(plan.Keep, order)
	// The agent overlay is built on the project image: remove it first.
	slices.SortFunc(plan.Remove, func(a, b Decision) int {
		return cmp.Or(cmp.Compare(kindOrder(a.Kind), kindOrder(b.Kind)), order(a, b))
	})
	return plan
}

func kindOrder(kind string) int {
	if kind == "agent" {
		return 0
	}
	return 1
}
