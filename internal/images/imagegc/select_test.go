package imagegc

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
)

func TestSelect(t *testing.T) {
	now := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	day := 24 * time.Hour
	img := func(project, key, kind string, age time.Duration, containers int64) Image {
		return Image{ID: "sha256:" + key + kind, Tags: []string{"forge/" + kind + ":" + key}, Project: project, Key: key, Kind: kind, Created: now.Add(-age), Containers: containers}
	}
	images := []Image{
		img("p", "k1", "project", 1*day, 0), img("p", "k1", "agent", 1*day, 0), // newest
		img("p", "k2", "project", 10*day, 0), img("p", "k2", "agent", 10*day, 0), // in use
		img("p", "k3", "project", 20*day, 0), img("p", "k3", "agent", 20*day, 1), // agent used by a container
		img("p", "k4", "project", 30*day, 0), img("p", "k4", "agent", 30*day, 0), // expired
		img("p", "k5", "agent", 2*day, 0),  // young
		img("q", "k6", "agent", 90*day, 0), // the newest of its project
	}
	plan := Select(images, map[string]bool{"k2": true}, Policy{KeepPerProject: 1, MaxAge: 7 * day}, now)
	reasons := map[string]string{}
	for _, d := range plan.Keep {
		reasons[d.ID] = "keep: " + d.Reason
	}
	for _, d := range plan.Remove {
		reasons[d.ID] = "remove: " + d.Reason
	}
	assert.Equal(t, map[string]string{
		"sha256:k1project": "keep: " + ReasonNewest, "sha256:k1agent": "keep: " + ReasonNewest,
		"sha256:k2project": "keep: " + ReasonInUse, "sha256:k2agent": "keep: " + ReasonInUse,
		"sha256:k3project": "remove: " + ReasonExpired, "sha256:k3agent": "keep: " + ReasonContainer,
		"sha256:k4project": "remove: " + ReasonExpired, "sha256:k4agent": "remove: " + ReasonExpired,
		"sha256:k5agent": "keep: " + ReasonYoung,
		"sha256:k6agent": "keep: " + ReasonNewest,
	}, reasons)
	assert.Equal(t, "agent", plan.Remove[0].Kind, "agent overlays go before the project images they build on")
}

func TestSelectDefaultsKeepAtLeastOne(t *testing.T) {
	now := time.Now()
	images := []Image{{ID: "a", Project: "p", Key: "k", Created: now.Add(-365 * 24 * time.Hour)}}
	plan := Select(images, nil, Policy{KeepPerProject: -5, MaxAge: -1}, now)
	assert.Empty(t, plan.Remove)
	assert.Equal(t, ReasonNewest, plan.Keep[0].Reason)
}
